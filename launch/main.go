package launch

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gocomm/comm/profile"
)

// Usage is commrun's synopsis.
const Usage = `usage: commrun -n N[,N...] [--nnodes M --node-rank R --master-addr A --master-port P]
               [--timeout D] [--kill-grace D] [--tail L] [--] program [args...]

Starts N ranks of program on this host with the gocomm/torchrun environment
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), prefixes their output with "[rank] ", forwards
SIGINT and SIGTERM, and stops every rank as soon as one fails (with
--elastic MIN:MAX, restarts it instead, to join the running world). On several
hosts run it once per host with the same --nnodes, --master-addr and
--master-port and that host's --node-rank; hosts with different numbers of
ranks all take the same list, -n 2,1,2. Exit status: 0 when every rank
exited 0; else the first failed rank's status (128+n for signal n), 124 after
--timeout, 128+n when interrupted by signal n, 2 for a usage error.

flags (torchrun's spellings --nproc_per_node, --node_rank, --master_addr,
--master_port are accepted too):
`

// Main is commrun: it parses args (without the program name), runs the job
// and returns the exit status. Ranks' output goes to stdout and stderr, the
// launcher's own messages (usage, the failure summary) to stderr. Signals
// received on signals are forwarded to the ranks.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	fs := flag.NewFlagSet("commrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	nprocs := &nprocsFlag{cfg: &cfg}
	fs.Var(nprocs, "n", "number of ranks on this host (required); on hosts with different numbers of ranks, every host's count in node-rank order, e.g. 2,1,2")
	fs.Var(nprocs, "nproc-per-node", "same as -n")
	fs.IntVar(&cfg.NNodes, "nnodes", 1, "number of hosts in the job")
	fs.IntVar(&cfg.NodeRank, "node-rank", 0, "this host's index, 0..nnodes-1")
	fs.StringVar(&cfg.MasterAddr, "master-addr", "", "host of rank 0's store (default 127.0.0.1; required with --nnodes > 1)")
	fs.IntVar(&cfg.MasterPort, "master-port", 0, "port of rank 0's store (default: a free port on one host, 29500 on several)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "stop every rank and fail after this long, e.g. 10m (default: no limit)")
	fs.DurationVar(&cfg.KillGrace, "kill-grace", DefaultKillGrace, "time between SIGTERM and SIGKILL when stopping ranks")
	fs.IntVar(&cfg.TailLines, "tail", DefaultTailLines, "lines of a failed rank's output to repeat in the summary")
	fs.StringVar(&cfg.Bind, "bind-to", "", "CPUs of each rank (GOCOMM_BIND): auto (default, unless GOCOMM_BIND is set: local rank r of n gets block r of n equal blocks of the CPUs; none when ranks outnumber CPUs), none, or a CPU list such as 0-3")
	fs.BoolVar(&cfg.KeepGoing, "keep-going", false, "when a rank fails, let the others run on (for programs that recover with Comm.Shrink); the job still fails, naming the first failed rank")
	var elastic string
	maxRestarts := fs.Int("max-restarts", 3, "with --elastic: how many failed processes this host restarts")
	fs.StringVar(&elastic, "elastic", "", "MIN:MAX: keep the job going through rank failures: restart a failed rank's process (up to --max-restarts), which joins the running world (GOCOMM_JOIN=1: comm.Init joins when the survivors call Comm.Grow); fail only when fewer than MIN ranks remain")
	var profiling bool
	var traceDir string
	fs.BoolVar(&profiling, "profile", false, "switch the comms logger on in every rank (GOCOMM_PROFILE=1); ranks print its summary with Profiler.LogSummary")
	fs.StringVar(&traceDir, "trace-dir", "", "switch the logger on and have every rank write a Chrome/Perfetto trace here (GOCOMM_TRACE_DIR) when it closes its world or calls Profiler.LogSummary; commrun merges them at the end and fails if none was written")
	// torchrun's spellings.
	fs.Var(nprocs, "nproc_per_node", "same as -n")
	fs.IntVar(&cfg.NodeRank, "node_rank", 0, "same as --node-rank")
	fs.StringVar(&cfg.MasterAddr, "master_addr", "", "same as --master-addr")
	fs.IntVar(&cfg.MasterPort, "master_port", 0, "same as --master-port")
	fs.Usage = func() {
		fmt.Fprint(stderr, Usage)
		fs.VisitAll(func(f *flag.Flag) {
			switch f.Name {
			case "nproc_per_node", "node_rank", "master_addr", "master_port":
				return
			}
			fmt.Fprintf(stderr, "  -%s\n    \t%s\n", f.Name, f.Usage)
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if rest := fs.Args(); len(rest) > 0 {
		cfg.Program, cfg.Args = rest[0], rest[1:]
	}
	cfg.Stdout, cfg.Stderr, cfg.Signals = stdout, stderr, signals
	if elastic != "" {
		lo, hi, ok := strings.Cut(elastic, ":")
		minR, err1 := strconv.Atoi(lo)
		maxR, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil {
			fmt.Fprintf(stderr, "commrun: --elastic %q: want MIN:MAX, such as 2:4\n", elastic)
			return 2
		}
		cfg.Elastic = &Elastic{Min: minR, Max: maxR, MaxRestarts: *maxRestarts}
	}
	if profiling || traceDir != "" {
		cfg.Env = append(os.Environ(), profile.EnvProfile+"=1")
		if traceDir != "" {
			abs, err := filepath.Abs(traceDir)
			if err == nil {
				err = os.MkdirAll(abs, 0o755)
			}
			if err != nil {
				fmt.Fprintf(stderr, "commrun: --trace-dir: %v\n", err)
				return 2
			}
			traceDir = abs
			cfg.Env = append(cfg.Env, profile.EnvTraceDir+"="+abs)
		}
	}
	start := time.Now()
	err := Run(ctx, cfg)
	if traceDir != "" {
		if merged, merr := mergeTraces(traceDir, start); merr != nil {
			fmt.Fprintf(stderr, "commrun: -trace-dir %s: %v\n", traceDir, merr)
			if err == nil {
				return 1 // asked for traces and got none: not a success
			}
		} else {
			fmt.Fprintf(stderr, "commrun: merged trace (open in https://ui.perfetto.dev): %s\n", merged)
		}
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, err)
	var je *JobError
	switch {
	case errors.As(err, &je):
		return je.ExitCode()
	case errors.Is(err, ErrConfig):
		fmt.Fprintln(stderr, "run commrun -h for help")
		return 2
	}
	return 1
}

// nprocsFlag is -n: one count for this host (every host runs as many), or
// every host's count in node-rank order.
type nprocsFlag struct{ cfg *Config }

func (f *nprocsFlag) String() string {
	if f.cfg == nil {
		return ""
	}
	if len(f.cfg.NProcsPerNode) > 0 {
		return joinInts(f.cfg.NProcsPerNode)
	}
	return strconv.Itoa(f.cfg.NProcs)
}

func (f *nprocsFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	counts := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("%q: want a number of ranks, or one per host such as 2,1,2", s)
		}
		counts[i] = n
	}
	f.cfg.NProcs, f.cfg.NProcsPerNode = counts[0], nil
	if len(counts) > 1 {
		f.cfg.NProcsPerNode = counts
	}
	return nil
}

// mergeTraces merges the rank traces written in dir since start into
// dir/profile.MergedTraceName and returns its path. Older files are an
// earlier run's and are left out; it is an error if no rank wrote one.
func mergeTraces(dir string, start time.Time) (string, error) {
	why := "no rank wrote a trace file there: ranks write theirs when they close their world (Comm.Close) or call " +
		"Profiler.LogSummary, with the comms logger on (commrun sets GOCOMM_PROFILE=1 and GOCOMM_TRACE_DIR; a program " +
		"that sets Options.Profile itself must set its TraceDir)"
	files, err := profile.TraceFiles([]string{dir})
	if errors.Is(err, profile.ErrTrace) {
		return "", errors.New(why)
	}
	if err != nil {
		return "", err
	}
	// Modification times may be truncated to the second.
	cut := start.Add(-time.Second)
	var fresh []string
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && !st.ModTime().Before(cut) {
			fresh = append(fresh, f)
		}
	}
	if len(fresh) == 0 {
		return "", fmt.Errorf("%s (its %d trace files are older than this run)", why, len(files))
	}
	var buf bytes.Buffer
	if err := profile.MergeTraceFiles(&buf, fresh); err != nil {
		return "", fmt.Errorf("merging the traces: %w", err)
	}
	out := filepath.Join(dir, profile.MergedTraceName)
	return out, os.WriteFile(out, buf.Bytes(), 0o644)
}
