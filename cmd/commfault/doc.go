// Command commfault injects faults into gocomm jobs on this host and
// measures how they fail, as a table:
//
//   - kill trials: 4 ranks run a loop of verified all-reduces of 8 B to
//     4 MiB; one rank, chosen at random, is killed with SIGKILL at a random
//     moment. Each trial reports whether every survivor's error names the
//     killed rank, whether one hung, and how long each took to fail.
//   - exit without Close: jobs whose ranks run verified all-reduces and
//     broadcasts, one of them exiting right after its last collective
//     without Close while the others Close; a job fails if any rank's
//     collective fails.
//   - storm: 1,000 hostile connections (garbage, huge lengths, half-open,
//     slow drip) against the store port and every data port of a running
//     job (with GOCOMM_SECRET); the job must finish with every result
//     right and no rank crashed.
//   - partition: 2+2 ranks on two simulated hosts (network namespaces, see
//     internal/netns; needs root and ip); the link of the second host is
//     taken down; every rank must fail within GOCOMM_TIMEOUT naming a rank
//     on the other side.
//
// It prints a markdown table (and samples of the errors behind the
// figures) with the commit it was built at:
//
//	go build -o /tmp/commfault ./cmd/commfault && /tmp/commfault -kills 100 -exits 100
//
// The scenarios' rank programs and the job harness are internal/faults':
// the ranks are commfault itself, re-executed with GOCOMM_FAULTS_ROLE
// naming the scenario (see that package for the variables and the lines
// a rank prints). Figures are what it measures; it never retries a trial.
//
// Who may import it: nobody (a command). It imports internal/faults and
// internal/netns.
package main
