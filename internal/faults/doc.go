// Package faults holds the rank programs of gocomm's fault scenarios and
// the harness that runs them as real processes on one host, for tests and
// for cmd/commfault:
//
//   - "loop": a loop of verified all-reduces of 8 B to 4 MiB, for kill -9
//     trials (RunKillTrial kills one rank and every survivor must fail
//     naming it), hostile connections and partitions; it ends after
//     MaxEnv, or when the file StopEnv names appears;
//   - "exit": a few verified all-reduces and broadcasts (whose root is
//     done as soon as it has sent), after which every rank, or only the
//     rank ExiterEnv names while the others Close, exits at once without
//     Close (RunExitJob): no rank may fail;
//   - "local/<case>": one rank makes a local error (an object it cannot
//     encode, a bad coalesced argument, an invalid root, ...) and every
//     rank must fail within seconds naming it (RunLocalError).
//
// A rank is any binary that calls Rank when the environment variable
// RoleEnv (GOCOMM_FAULTS_ROLE) names a scenario: a test binary through
// testkit.MainErr, or cmd/commfault re-executing itself. It joins the
// world with comm.Init (the launcher's variables; GOCOMM_TRANSPORT picks
// shm or tcp) and reports on stdout, one line per event:
//
//	ready                                   the loop is running
//	fail <origin> <kind> <reporter> <ms> <error>  an operation failed: the root
//	                                        cause it names (see Blame) and
//	                                        how long it took, in ms
//	wrong <text>                            a result was wrong
//	closeerr <text>                         Close failed
//	done <n>                                it finished n collectives
//
// Concurrency: Rank runs one rank per process; a Job is used by one
// goroutine. Who may import it: tests and commands (it sits on the public
// API).
package faults
