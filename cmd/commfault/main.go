package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gocomm/comm/internal/faults"
)

func main() {
	if role := os.Getenv(faults.RoleEnv); role != "" {
		os.Exit(rankMain(role))
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// config is the command line.
type config struct {
	kills, exits, storm int
	exitIters           int
	transports          []string
	partition           bool
	seed                uint64
	hold                time.Duration
	samples             int
	commit              string
	p                   params
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("commfault", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var transports string
	fs.IntVar(&c.kills, "kills", 100, "kill -9 trials per transport (0: none)")
	fs.IntVar(&c.exits, "exits", 100, "exit-without-Close jobs per transport (0: none)")
	fs.IntVar(&c.exitIters, "exit-iters", 20, "verified all-reduces per rank in an exit-without-Close job")
	fs.IntVar(&c.storm, "storm", 1000, "hostile connections in the storm (0: no storm)")
	fs.DurationVar(&c.hold, "hold", time.Second, "how long a half-open or slow-drip hostile connection lasts")
	fs.BoolVar(&c.partition, "partition", true, "run the partition scenario (needs root and ip)")
	fs.StringVar(&transports, "transports", "shm,tcp", "transports of the kill and exit scenarios")
	fs.IntVar(&c.p.ranks, "ranks", 4, "ranks per job")
	fs.DurationVar(&c.p.timeout, "timeout", 10*time.Second, "GOCOMM_TIMEOUT of the ranks (the partition must be named within it)")
	fs.DurationVar(&c.p.hang, "hang", 10*time.Second, "a rank not failed this long after the fault counts as hung")
	fs.DurationVar(&c.p.ready, "ready", 60*time.Second, "bound of a job's start-up")
	fs.DurationVar(&c.p.killAfter, "kill-window", 300*time.Millisecond, "kills land uniformly this long after every rank is ready")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "random seed (victims, moments, sizes)")
	fs.IntVar(&c.samples, "samples", 3, "errors shown per scenario under the table")
	fs.StringVar(&c.commit, "commit", "", "the commit the binary was built at, for the report (default: from the build info, which -buildvcs=false leaves out)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("commfault: unexpected arguments %q (flags only)", fs.Args())
	}
	for _, t := range strings.Split(transports, ",") {
		switch t = strings.TrimSpace(t); t {
		case "shm", "tcp":
			c.transports = append(c.transports, t)
		case "":
		default:
			return c, fmt.Errorf("commfault: -transports %q: want shm, tcp or both (shm,tcp)", transports)
		}
	}
	switch {
	case c.kills < 0 || c.exits < 0 || c.storm < 0 || c.exitIters < 1:
		return c, fmt.Errorf("commfault: -kills, -exits and -storm must be >= 0 and -exit-iters >= 1")
	case c.p.ranks < 2:
		return c, fmt.Errorf("commfault: -ranks %d: want at least 2", c.p.ranks)
	case c.p.timeout <= 0 || c.p.hang <= 0 || c.p.ready <= 0 || c.p.killAfter < 0 || c.hold <= 0:
		return c, fmt.Errorf("commfault: -timeout, -hang, -ready and -hold must be positive, -kill-window >= 0")
	}
	c.p.rng = rand.New(rand.NewPCG(c.seed, 0x636f6d6d))
	return c, nil
}

// revision is the commit the binary was built at: given, or from its
// build info.
func revision(given string) string {
	if given != "" {
		return given
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown (not in the build info: pass -commit)", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " with uncommitted changes in the tree"
			}
		}
	}
	return rev + dirty
}

// loadAvg is /proc/loadavg's first three figures, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// run is the command; it returns the exit status: 0 when every scenario
// ran (whatever it measured), 2 for a usage error, 1 when a scenario could
// not be set up at all.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(stderr, err)
		}
		return 2
	}
	start, load := time.Now(), loadAvg()
	t := &table{samples: c.samples}
	status := 0
	fmt.Fprintf(stderr, "commfault: seed %d, load %s\n", c.seed, loadAvg())
	for _, tr := range c.transports {
		if c.kills > 0 {
			fmt.Fprintf(stderr, "commfault: %d kill trials over %s\n", c.kills, tr)
			if !t.kills(ctx, c, tr) {
				status = 1
			}
		}
	}
	for _, tr := range c.transports {
		if c.exits > 0 {
			fmt.Fprintf(stderr, "commfault: %d exit-without-Close jobs over %s\n", c.exits, tr)
			if !t.exits(ctx, c, tr) {
				status = 1
			}
		}
	}
	if c.storm > 0 {
		fmt.Fprintf(stderr, "commfault: storm of %d hostile connections\n", c.storm)
		if !t.storm(ctx, c) {
			status = 1
		}
	}
	if c.partition {
		fmt.Fprintln(stderr, "commfault: partition")
		if !t.partition(ctx, c) {
			status = 1
		}
	}
	fmt.Fprintf(stdout, "Measured at commit %s, %s, %d ranks per job, GOCOMM_TIMEOUT %v, hang limit %v, seed %d; took %v; load average %s before, %s after (times include the machine's load).\n\n",
		revision(c.commit), time.Now().UTC().Format("2006-01-02 15:04 UTC"), c.p.ranks, c.p.timeout, c.p.hang, c.seed,
		time.Since(start).Round(time.Second), load, loadAvg())
	t.write(stdout)
	return status
}
