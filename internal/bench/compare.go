package bench

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/launch"
)

// The peer harnesses, written out and run (the C one compiled first) by
// commbench compare.
var (
	//go:embed peers/mpi_bench.c
	mpiHarness []byte
	//go:embed peers/gloo_bench.py
	glooHarness []byte
)

// Series of the comparison.
const (
	SeriesGocommTCP = "gocomm-tcp"
	SeriesGocommSHM = "gocomm-shm"
	// SeriesGocommSHMShared is gocomm-shm with its buffers from
	// comm.AllocShared (--shared-buffers): all-reduces read the inputs in
	// place.
	SeriesGocommSHMShared = "gocomm-shm-shared"
	SeriesMPISHM          = "mpi-shm"
	// SeriesMPISHMMT is mpi-shm initialised with MPI_THREAD_MULTIPLE, the
	// thread level gocomm's MPI backend runs at.
	SeriesMPISHMMT = "mpi-shm-mt"
	SeriesMPITCP   = "mpi-tcp"
	SeriesGloo     = "gloo"
	// SeriesMPIBackend is gocomm on its MPI backend (backend/mpi) under
	// mpirun with the btls of mpi-shm, beside raw MPI; it needs a
	// commbench built with cgo and -tags mpi.
	SeriesMPIBackend = "mpi-backend"
	// SeriesMPISHMBest and SeriesMPITCPBest are Open MPI at its best over
	// vader and tcp: per case, the fastest of its tuned algorithms, each
	// forced in a run of its own (see --mpi-algos).
	SeriesMPISHMBest = "mpi-shm-best"
	SeriesMPITCPBest = "mpi-tcp-best"
)

// DefaultSeries is what commbench compare runs by default.
var DefaultSeries = []string{SeriesGocommTCP, SeriesGocommSHM, SeriesMPIBackend, SeriesMPISHM, SeriesMPISHMBest, SeriesMPITCP, SeriesMPITCPBest, SeriesGloo}

// AllSeries is every series --series accepts: the default ones and
// mpi-shm-mt.
var AllSeries = append(slices.Clone(DefaultSeries), SeriesMPISHMMT, SeriesGocommSHMShared)

// DefaultCompareOps is the default --op of commbench compare: the
// all-reduce sweep, and the other bandwidth ops at 64 MiB.
const DefaultCompareOps = "allreduce,broadcast@64M,allgather@64M,reducescatter@64M,alltoall@64M"

// CompareConfig is a comparison run.
type CompareConfig struct {
	Ranks    int
	Sweep    SweepConfig
	DType    comm.DType
	RedOp    comm.ReduceOp
	Check    bool
	Runs     int      // runs of every series, interleaved; the medians are reported
	Series   []string // which series, in order
	Backend  string   // gocomm backend of the gocomm series
	AlgoText string
	Python   string // interpreter of the gloo harness
	MPIRun   string
	MPICC    string
	MPIArgs  []string      // extra mpirun arguments
	Timeout  time.Duration // bound of one series run
	JSON     string
	CSV      string
	Plot     string
	WorkDir  string // keep plans, harnesses and raw files here ("": a temporary directory, removed)
	Quiet    bool
	Command  string
	// MPIAlgos narrows the tuned algorithms the best-of series try (nil:
	// every one Open MPI lists for the op).
	MPIAlgos MPIAlgoChoice

	bestNote string // what the best-of series try, for the header (set by Compare)
}

const compareUsage = `commbench compare runs one op/size sweep for several implementations side by
side on this host and prints their times, bus bandwidths and the ratios
ours/peer (in busbw, i.e. peer time / our time: above 1 gocomm is faster).

Series:
  gocomm-tcp   commbench's own ranks, gocomm over TCP (--transport tcp)
  gocomm-shm   gocomm over its shared-memory path (--transport shm)
  gocomm-shm-shared
               gocomm-shm with buffers from comm.AllocShared (--shared-buffers),
               which every rank maps: all-reduces read the inputs in place (not
               in the default series)
  mpi-backend  gocomm on its MPI backend (--backend mpi) under mpirun, with the
               btls of mpi-shm; needs this commbench built with cgo and -tags mpi
  mpi-shm      Open MPI through a C harness under mpirun, --mca btl self,vader
  mpi-shm-mt   mpi-shm with MPI_Init_thread(MPI_THREAD_MULTIPLE), the thread
               level of gocomm's MPI backend (not in the default series)
  mpi-tcp      the same with --mca btl self,tcp over loopback
  mpi-shm-best, mpi-tcp-best
               Open MPI at its best over vader and tcp: per op and size, the
               fastest of its tuned algorithms, each forced in a run of its own
               (--mca coll_tuned_use_dynamic_rules 1 --mca
               coll_tuned_<op>_algorithm K, for every K ompi_info lists: allreduce
               1-6, bcast 1-9, allgather 1-6, reduce_scatter_block 1-4, alltoall
               1-5, reduce 1-7, barrier 1-6 in Open MPI 4.1; two_proc on 2 ranks
               only; segment sizes at their defaults); the "alg" column and the
               JSON/CSV "algorithm" field say which K won. Costly: each K is a run
               (9 mpirun starts per btl and round), and every case runs once per
               K its op has (6x the all-reduce time of mpi-shm); --mpi-algos
               narrows the sweep
  gloo         torch.distributed's gloo backend through a Python harness, one
               process per rank, init_method tcp://127.0.0.1:<port>

Every series runs the same plan (cases, warm-ups, iterations). The series (and
each K of the best-of series) take turns, run after run, in a rotating order,
and each reported time is the median over the runs of each run's timed loop per
iteration (the slowest rank's): a machine's speed may drift within seconds, and
interleaving spreads that over every series. A series that cannot start (no
mpicc, no torch) is reported and left out.
Ratios: each gocomm series over the peers of its link (gocomm-shm and mpi-backend
over mpi-shm and mpi-shm-best, gocomm-tcp over mpi-tcp and mpi-tcp-best) and over
gloo.

Example:
  commbench compare -n 2 --runs 3 --plot compare.svg --json compare.json

Flags:
`

// ParseCompareArgs parses commbench compare's command line.
func ParseCompareArgs(args []string, out io.Writer) (CompareConfig, error) {
	cfg := CompareConfig{
		Ranks: 2, DType: core.Float32, RedOp: core.Sum, Runs: 3, Backend: "native",
		Sweep:  SweepConfig{Min: 8, Max: 64 << 20, Factor: 2, Warmup: 5, Iters: 50, Budget: 1 << 30},
		Python: "/usr/bin/python3", MPIRun: "mpirun", MPICC: "mpicc", Timeout: 15 * time.Minute,
		Command: "commbench compare " + joinArgs(args),
	}
	fs := flag.NewFlagSet("commbench compare", flag.ContinueOnError)
	fs.SetOutput(out)
	var ops, dtype, redop, series, mpiArgs string
	fs.IntVar(&cfg.Ranks, "n", cfg.Ranks, "ranks of every series")
	for _, name := range []string{"b", "minbytes"} {
		fs.Var(sizeFlag{&cfg.Sweep.Min}, name, "smallest size S")
	}
	for _, name := range []string{"e", "maxbytes"} {
		fs.Var(sizeFlag{&cfg.Sweep.Max}, name, "largest size S")
	}
	for _, name := range []string{"f", "stepfactor"} {
		fs.Float64Var(&cfg.Sweep.Factor, name, cfg.Sweep.Factor, "multiply the size by this factor between steps")
	}
	fs.Var(sizeFlag{&cfg.Sweep.Step}, "step", "add this many bytes between steps (with -f 1)")
	fs.StringVar(&ops, "op", DefaultCompareOps, "ops, comma-separated; op@size or op@min:max for an op's own sizes")
	for _, name := range []string{"d", "datatype"} {
		fs.StringVar(&dtype, name, "float32", "element type")
	}
	for _, name := range []string{"o", "redop"} {
		fs.StringVar(&redop, name, "sum", "reduction")
	}
	for _, name := range []string{"w", "warmup"} {
		fs.IntVar(&cfg.Sweep.Warmup, name, cfg.Sweep.Warmup, "warm-up iterations per size")
	}
	for _, name := range []string{"i", "iters"} {
		fs.IntVar(&cfg.Sweep.Iters, name, cfg.Sweep.Iters, "timed iterations per size")
	}
	fs.Var(sizeFlag{&cfg.Sweep.Budget}, "budget", "cap iterations*size per size; 0: no cap")
	for _, name := range []string{"r", "root"} {
		fs.IntVar(&cfg.Sweep.Root, name, 0, "root of broadcast and reduce")
	}
	for _, name := range []string{"c", "check"} {
		fs.BoolVar(&cfg.Check, name, false, "verify every result of every series")
	}
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs of every series, interleaved (medians are reported)")
	fs.StringVar(&series, "series", strings.Join(DefaultSeries, ","), "series to run, comma-separated")
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "gocomm backend of the gocomm series")
	fs.StringVar(&cfg.AlgoText, "algo", "", "force gocomm's algorithms: op=algorithm,...")
	fs.StringVar(&cfg.Python, "python", cfg.Python, "Python with torch, for the gloo series")
	fs.StringVar(&cfg.MPIRun, "mpirun", cfg.MPIRun, "Open MPI's mpirun")
	fs.StringVar(&cfg.MPICC, "mpicc", cfg.MPICC, "MPI C compiler wrapper, to build the MPI harness")
	fs.StringVar(&mpiArgs, "mpirun-args", "", "extra mpirun arguments, space-separated (e.g. \"--bind-to none\")")
	fs.Var(&cfg.MPIAlgos, "mpi-algos", "the only tuned algorithms the mpi-*-best series try for an op, op=K,K-K (e.g. allreduce=2,4-6); repeatable; ops not named try all")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of one run of one series")
	fs.StringVar(&cfg.JSON, "json", "", "write every series' results as JSON to this file")
	fs.StringVar(&cfg.CSV, "csv", "", "write every series' results as CSV to this file")
	fs.StringVar(&cfg.Plot, "plot", "", "draw busbw against size for every series as SVG to this file")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "keep the plan, harnesses and raw results in this directory")
	for _, name := range []string{"q", "quiet"} {
		fs.BoolVar(&cfg.Quiet, name, false, "no progress lines on stderr")
	}
	if err := parseFlags(fs, out, compareUsage, args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.Sweep.Ops, err = ParseOpSpecs(ops); err != nil {
		return cfg, fmt.Errorf("commbench compare: --op: %w", err)
	}
	for _, sp := range cfg.Sweep.Ops {
		if sp.Op == OneBit {
			return cfg, fmt.Errorf("commbench compare: --op onebit: Open MPI and gloo have no 1-bit all-reduce; run commbench --op allreduce,onebit to compare it with gocomm's all-reduce")
		}
	}
	if cfg.DType, err = ParseDType(dtype); err != nil {
		return cfg, fmt.Errorf("commbench compare: -d: %w", err)
	}
	if cfg.RedOp, err = ParseRedOp(redop); err != nil {
		return cfg, fmt.Errorf("commbench compare: -o: %w", err)
	}
	if _, err := ParseAlgorithms(cfg.AlgoText); err != nil {
		return cfg, fmt.Errorf("commbench compare: %w", err)
	}
	cfg.Series = nil
	for _, s := range strings.Split(series, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(AllSeries, s) {
			return cfg, fmt.Errorf("commbench compare: --series: unknown series %q (want some of %s)", s, strings.Join(AllSeries, ", "))
		}
		if slices.Contains(cfg.Series, s) {
			return cfg, fmt.Errorf("commbench compare: --series: %q given twice", s)
		}
		cfg.Series = append(cfg.Series, s)
	}
	cfg.MPIArgs = strings.Fields(mpiArgs)
	switch {
	case len(cfg.Series) == 0:
		return cfg, errors.New("commbench compare: --series: no series")
	case cfg.Runs < 1:
		return cfg, fmt.Errorf("commbench compare: --runs %d: want at least 1", cfg.Runs)
	case cfg.Ranks < 1:
		return cfg, fmt.Errorf("commbench compare: -n %d: want at least 1 rank", cfg.Ranks)
	case cfg.Timeout <= 0:
		return cfg, fmt.Errorf("commbench compare: --timeout %v: want a positive duration", cfg.Timeout)
	}
	if _, err := BuildPlan(cfg.Sweep, cfg.DType, cfg.RedOp, cfg.Check, cfg.Ranks); err != nil {
		return cfg, fmt.Errorf("commbench compare: %w", err)
	}
	return cfg, nil
}

// CompareMain is commbench compare's command line.
func CompareMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseCompareArgs(args, stderr)
	if errors.Is(err, ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := Compare(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// A Runner runs one series: Setup once (compile, probe), then Run once
// per run, which executes the plan file and writes the raw results file.
type Runner struct {
	Name  string
	Ours  bool // a gocomm series (the numerator of the ratios)
	Setup func(ctx context.Context) error
	Run   func(ctx context.Context, planPath, rawPath string) error
	// BestOf, when not "", makes this runner one variant of the best-of
	// series BestOf (a peer): its plan keeps only the cases of Forced's
	// ops, its rows carry Forced[op] (the algorithm it forces, e.g. "4
	// ring") as Result.Algo, and the series reports, per case, the
	// variant with the lowest time. Its own rows go to the JSON's
	// "variants".
	BestOf string
	Forced map[Op]string
}

// Compare runs the comparison cfg describes and prints it to stdout.
func Compare(ctx context.Context, cfg CompareConfig, stdout, stderr io.Writer) error {
	dir := cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "commbench-compare-")
		if err != nil {
			return fmt.Errorf("commbench compare: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("commbench compare: %w", err)
	}
	var variants []mpiVariant
	if slices.Contains(cfg.Series, SeriesMPISHMBest) || slices.Contains(cfg.Series, SeriesMPITCPBest) {
		plan, err := BuildPlan(cfg.Sweep, cfg.DType, cfg.RedOp, cfg.Check, cfg.Ranks)
		if err != nil {
			return fmt.Errorf("commbench compare: %w", err)
		}
		algos, source := probeTunedAlgorithms(ctx, cfg.MPIRun)
		if variants, err = planMPIVariants(planOps(plan), algos, cfg.MPIAlgos, cfg.Ranks); err != nil {
			return fmt.Errorf("commbench compare: %w", err)
		}
		if len(variants) == 0 {
			cfg.bestNote = "no op of the plan has tuned algorithms"
		} else {
			cfg.bestNote = describeMPIVariants(planOps(plan), variants) + "; algorithms from " + source
		}
	}
	runners, err := runners(cfg, dir, variants)
	if err != nil {
		return err
	}
	return CompareWith(ctx, cfg, dir, runners, stdout, stderr)
}

// runners builds the Runner of every series cfg names; a best-of series
// is one runner per variant.
func runners(cfg CompareConfig, dir string, variants []mpiVariant) ([]Runner, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("commbench compare: cannot find this executable to start gocomm's ranks: %w", err)
	}
	mpiBin := filepath.Join(dir, "mpi_bench")
	var mpiBuilt error
	var mpiTried bool
	mpiSetup := func(ctx context.Context) error { // once for every MPI series and variant
		if !mpiTried {
			mpiTried = true
			mpiBuilt = buildMPIHarness(ctx, cfg.MPICC, cfg.MPIRun, dir, mpiBin)
		}
		return mpiBuilt
	}
	var rs []Runner
	for _, s := range cfg.Series {
		switch s {
		case SeriesGocommTCP, SeriesGocommSHM, SeriesGocommSHMShared:
			t := TransportTCP
			if s != SeriesGocommTCP {
				t = TransportSHM
			}
			rs = append(rs, Runner{
				Name: s, Ours: true,
				Setup: func(context.Context) error { return selectTransport(t, &comm.Options{}) },
				Run: func(ctx context.Context, plan, raw string) error {
					args := []string{"--plan", plan, "--raw", raw, "-q", "--transport", t.String(), "--backend", cfg.Backend, "--series", s}
					if cfg.AlgoText != "" {
						args = append(args, "--algo", cfg.AlgoText)
					}
					if s == SeriesGocommSHMShared {
						args = append(args, "--shared-buffers")
					}
					return runJob(ctx, "commbench compare", cfg.Ranks, cfg.Timeout, self, args, nil)
				},
			})
		case SeriesMPIBackend:
			rs = append(rs, Runner{
				Name: s, Ours: true,
				Setup: func(context.Context) error { return mpiBackendReady(cfg.MPIRun) },
				Run: func(ctx context.Context, plan, raw string) error {
					args := append(mpirunBase(cfg), "--mca", "btl", "self,vader")
					args = append(args, self, "--plan", plan, "--raw", raw, "-q", "--backend", "mpi", "--series", s)
					if cfg.AlgoText != "" {
						args = append(args, "--algo", cfg.AlgoText)
					}
					return runCommand(ctx, cfg.Timeout, cfg.MPIRun, args)
				},
			})
		case SeriesMPISHM, SeriesMPITCP, SeriesMPISHMMT:
			btl := mpiBTL(s)
			rs = append(rs, Runner{
				Name: s, Setup: mpiSetup,
				Run: func(ctx context.Context, plan, raw string) error {
					args := append(mpirunBase(cfg), btl...)
					args = append(args, mpiBin, plan, raw)
					if s == SeriesMPISHMMT {
						args = append(args, "multiple")
					}
					return runCommand(ctx, cfg.Timeout, cfg.MPIRun, args)
				},
			})
		case SeriesMPISHMBest, SeriesMPITCPBest:
			btl := mpiBTL(s)
			for _, v := range variants {
				forced := map[Op]string{}
				for op, a := range v.Forced {
					forced[op] = a.String()
				}
				rs = append(rs, Runner{
					Name: fmt.Sprintf("%s-k%d", strings.TrimSuffix(s, "-best"), v.K), Setup: mpiSetup,
					BestOf: s, Forced: forced,
					Run: func(ctx context.Context, plan, raw string) error {
						args := append(mpirunBase(cfg), btl...)
						args = append(args, mpiVariantArgs(v)...)
						args = append(args, mpiBin, plan, raw)
						return runCommand(ctx, cfg.Timeout, cfg.MPIRun, args)
					},
				})
			}
		case SeriesGloo:
			script := filepath.Join(dir, "gloo_bench.py")
			rs = append(rs, Runner{
				Name:  s,
				Setup: func(ctx context.Context) error { return setupGloo(ctx, cfg.Python, script) },
				Run: func(ctx context.Context, plan, raw string) error {
					return runJob(ctx, "commbench compare", cfg.Ranks, cfg.Timeout, cfg.Python, []string{script, plan, raw}, glooEnv())
				},
			})
		}
	}
	return rs, nil
}

// mpiBTL is the --mca btl choice of an MPI series: vader (shared
// memory) or tcp over loopback.
func mpiBTL(series string) []string {
	if series == SeriesMPITCP || series == SeriesMPITCPBest {
		return []string{"--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"}
	}
	return []string{"--mca", "btl", "self,vader"}
}

// mpirunBase is the start of every mpirun command line: n ranks, allowed
// as root and beyond the core count, and the ob1 messaging layer so that
// the --mca btl choice is the one used.
func mpirunBase(cfg CompareConfig) []string {
	args := []string{"-np", strconv.Itoa(cfg.Ranks), "--oversubscribe", "--mca", "pml", "ob1"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	return append(args, cfg.MPIArgs...)
}

// mpiBackendReady checks that this binary has gocomm's MPI backend (built
// with cgo and -tags mpi) and that mpirun is there.
func mpiBackendReady(mpirun string) error {
	d, ok := backend.Lookup("mpi")
	b, isB := d.(backend.Bootstrapper)
	if !ok || !isB || !b.Available() {
		return errors.New("this commbench has no MPI backend: build it with cgo and -tags mpi (go build -tags mpi ./cmd/commbench)")
	}
	if _, err := exec.LookPath(mpirun); err != nil {
		return fmt.Errorf("no %s: %w", mpirun, err)
	}
	return nil
}

// buildMPIHarness writes the C harness into dir and compiles it.
func buildMPIHarness(ctx context.Context, mpicc, mpirun, dir, bin string) error {
	if _, err := exec.LookPath(mpirun); err != nil {
		return fmt.Errorf("no %s: %w", mpirun, err)
	}
	src := filepath.Join(dir, "mpi_bench.c")
	if err := os.WriteFile(src, mpiHarness, 0o644); err != nil {
		return err
	}
	return runCommand(ctx, 2*time.Minute, mpicc, []string{"-O2", "-o", bin, src, "-lm"})
}

// setupGloo writes the Python harness and checks that torch imports.
func setupGloo(ctx context.Context, python, script string) error {
	return setupPython(ctx, python, script, glooHarness, "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()")
}

// setupPython writes a Python harness to script and checks, with probe,
// that python has what it needs.
func setupPython(ctx context.Context, python, script string, harness []byte, probe string) error {
	if err := os.WriteFile(script, harness, 0o644); err != nil {
		return err
	}
	return runCommand(ctx, 2*time.Minute, python, []string{"-c", probe})
}

// glooEnv is the environment of a torch job on gloo: loopback, one
// thread per rank.
func glooEnv() []string {
	return append(os.Environ(), "GLOO_SOCKET_IFNAME=lo", "OMP_NUM_THREADS=1")
}

// runJob starts ranks processes of program with launch.Run; name labels
// its failures (the command that runs the job).
func runJob(ctx context.Context, name string, ranks int, timeout time.Duration, program string, args, env []string) error {
	var out bytes.Buffer
	return launch.Run(ctx, launch.Config{
		NProcs: ranks, Program: program, Args: args, Env: env, Timeout: timeout,
		Stdout: io.Discard, Stderr: &out, Name: name, TailLines: 20,
	})
}

// runCommand runs a command, bounded by timeout, and returns its output
// in the error when it fails.
func runCommand(ctx context.Context, timeout time.Duration, name string, args []string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// mpirun stops its ranks on SIGTERM; SIGKILL would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := strings.TrimSpace(out.String())
		if len(tail) > 2000 {
			tail = "..." + tail[len(tail)-2000:]
		}
		if tail != "" {
			return fmt.Errorf("%s %s: %w\n%s", name, joinArgs(args), err, tail)
		}
		return fmt.Errorf("%s %s: %w", name, joinArgs(args), err)
	}
	return nil
}

// CompareWith runs the comparison with the given runners, working in dir.
func CompareWith(ctx context.Context, cfg CompareConfig, dir string, runners []Runner, stdout, stderr io.Writer) error {
	plan, err := BuildPlan(cfg.Sweep, cfg.DType, cfg.RedOp, cfg.Check, cfg.Ranks)
	if err != nil {
		return fmt.Errorf("commbench compare: %w", err)
	}
	planPath := filepath.Join(dir, "plan.txt")
	if err := writeFile(planPath, func(w io.Writer) error { return WritePlan(w, plan) }); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		if !cfg.Quiet {
			fmt.Fprintf(stderr, "commbench compare: "+format+"\n", args...)
		}
	}
	var notes []string
	var active []Runner
	plans := map[string]Plan{}       // runner -> the plan it runs
	planPaths := map[string]string{} // runner -> its plan file
	for _, r := range runners {
		plans[r.Name], planPaths[r.Name] = plan, planPath
		if r.BestOf != "" {
			p := filterPlan(plan, func(op Op) bool { _, ok := r.Forced[op]; return ok })
			if len(p.Cases) == 0 {
				continue // nothing of the plan has this variant's algorithms
			}
			path := filepath.Join(dir, "plan-"+r.Name+".txt")
			if err := writeFile(path, func(w io.Writer) error { return WritePlan(w, p) }); err != nil {
				return err
			}
			plans[r.Name], planPaths[r.Name] = p, path
		}
		if r.Setup != nil {
			if err := r.Setup(ctx); err != nil {
				name := cmp.Or(r.BestOf, r.Name) // one note for all of a best-of series' variants
				note := fmt.Sprintf("%s: not run: %v", name, oneLine(err))
				if !slices.Contains(notes, note) {
					notes = append(notes, note)
					logf("%s: not run: %v", name, err)
				}
				continue
			}
		}
		active = append(active, r)
	}
	if len(active) == 0 {
		return fmt.Errorf("commbench compare: no series could run:\n  %s", strings.Join(notes, "\n  "))
	}
	runs := make(map[string][][]Sample)
	start := time.Now()
	for run := 0; run < cfg.Runs; run++ {
		for k := range active {
			r := active[(k+run)%len(active)] // rotate who goes first
			if err := ctx.Err(); err != nil {
				return err
			}
			raw := filepath.Join(dir, fmt.Sprintf("raw-%s-%d.txt", r.Name, run+1))
			t0 := time.Now()
			logf("run %d/%d: %s ...", run+1, cfg.Runs, r.Name)
			err := r.Run(ctx, planPaths[r.Name], raw)
			var samples []Sample
			if err == nil {
				samples, err = readRaw(raw, cfg.Ranks)
			}
			if err != nil {
				notes = append(notes, fmt.Sprintf("%s: run %d failed: %v", r.Name, run+1, oneLine(err)))
				logf("%s: run %d failed: %v", r.Name, run+1, err)
				continue
			}
			logf("run %d/%d: %s done in %s (%s elapsed)", run+1, cfg.Runs, r.Name,
				time.Since(t0).Round(100*time.Millisecond), time.Since(start).Round(time.Second))
			runs[r.Name] = append(runs[r.Name], samples)
		}
	}
	results, variants, ours, peers := collectResults(cfg.Ranks, plan, plans, active, runs)
	for _, v := range variants {
		// The check line counts the rows shown; a losing variant's
		// wrong results are Open MPI's and must not vanish with it.
		if v.Wrong > 0 {
			notes = append(notes, fmt.Sprintf("%s (%s): %v %d B: %d wrong elements", v.Series, v.Algo, v.Op, v.Bytes, v.Wrong))
		}
	}
	meta := Meta{
		Series: "compare", Backend: cfg.Backend, Transport: "various", Ranks: cfg.Ranks, DType: plan.DType.String(),
		RedOp: RedOpName(plan.RedOp), Warmup: cfg.Sweep.Warmup, Iters: cfg.Sweep.Iters, Budget: cfg.Sweep.Budget,
		Check: plan.Check, Algo: cfg.AlgoText, Started: start.Format(time.RFC3339), Command: cfg.Command,
		MPIAlgos: cfg.bestNote,
	}
	meta.Host, _ = os.Hostname()
	WriteComparison(stdout, meta, cfg.Runs, results, ours, peers, notes)
	title := fmt.Sprintf("commbench compare: %d ranks, %s, medians of %d runs", cfg.Ranks, plan.DType, cfg.Runs)
	if cfg.JSON != "" {
		if err := writeFile(cfg.JSON, func(w io.Writer) error { return WriteJSONVariants(w, []Meta{meta}, results, variants) }); err != nil {
			return err
		}
	}
	if err := writeOutputs("", cfg.CSV, cfg.Plot, title, []Meta{meta}, results); err != nil {
		return err
	}
	if len(results) == 0 {
		return errors.New("commbench compare: every run failed")
	}
	return nil
}

// collectResults aggregates the runs of every active runner (each over
// the plan it ran): the rows of the plain series, in runner order, with
// each best-of series' rows (bestOf over its variants) where its first
// variant stands; the variants' own rows, their Algo set; and the names
// of our series and the peers'.
func collectResults(n int, plan Plan, plans map[string]Plan, active []Runner, runs map[string][][]Sample) (results, variants []Result, ours, peers []string) {
	groups := map[string][][]Result{}
	for _, r := range active {
		if r.BestOf == "" || len(runs[r.Name]) == 0 {
			continue
		}
		rows := Aggregate(r.Name, n, plans[r.Name], runs[r.Name])
		for i := range rows {
			rows[i].Algo = r.Forced[rows[i].Op]
		}
		groups[r.BestOf] = append(groups[r.BestOf], rows)
		variants = append(variants, rows...)
	}
	for _, r := range active {
		name := r.Name
		switch {
		case r.BestOf != "":
			name = r.BestOf
			if slices.Contains(peers, name) || len(groups[name]) == 0 {
				continue
			}
			results = append(results, bestOf(name, plan, groups[name])...)
		case len(runs[r.Name]) == 0:
			continue
		default:
			results = append(results, Aggregate(r.Name, n, plans[r.Name], runs[r.Name])...)
		}
		if r.Ours {
			ours = append(ours, name)
		} else {
			peers = append(peers, name)
		}
	}
	return results, variants, ours, peers
}

func readRaw(path string, n int) ([]Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no results: %w", err)
	}
	defer f.Close()
	got, samples, err := ParseRaw(f)
	if err != nil {
		return nil, err
	}
	if got != n {
		return nil, fmt.Errorf("%s: %d ranks ran, want %d", path, got, n)
	}
	return samples, nil
}

func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// caseKey identifies a case across runs and series.
type caseKey struct {
	op    Op
	bytes int64
}

// Aggregate combines the runs of one series: per case, the time is the
// median over runs of each run's loop time per iteration (Sample.Loop, else
// the mean of its iterations), the min the least of the runs'
// minima, the median the median of their medians and the max the largest
// maximum. Cases keep the plan's order; a case some run skipped is
// skipped; Wrong adds up the runs' counts.
func Aggregate(series string, n int, plan Plan, runs [][]Sample) []Result {
	type acc struct {
		means, mins, meds, p99s, maxs []float64
		wrong                         int64
		checked                       bool
		skip                          string
		iters, warmup, root           int
	}
	accs := map[caseKey]*acc{}
	for _, samples := range runs {
		for _, s := range samples {
			k := caseKey{s.Op, s.Bytes}
			a := accs[k]
			if a == nil {
				a = &acc{}
				accs[k] = a
			}
			if s.Skip != "" {
				a.skip = s.Skip
				continue
			}
			st := Stats(s.Times)
			a.means, a.mins, a.meds, a.maxs = append(a.means, s.time(st)), append(a.mins, st.Min), append(a.meds, st.Median), append(a.maxs, st.Max)
			a.p99s = append(a.p99s, st.P99)
			a.iters, a.warmup, a.root = len(s.Times), s.Warmup, s.Root
			if s.Wrong >= 0 {
				a.checked = true
				a.wrong += s.Wrong
			}
		}
	}
	var out []Result
	for _, cs := range plan.Cases {
		a := accs[caseKey{cs.Op, cs.Bytes}]
		if a == nil {
			continue
		}
		// Summarize one synthetic sample for the row's fixed columns.
		r := Summarize(series, n, plan.DType, plan.RedOp, Sample{Case: cs, Wrong: -1, Skip: a.skip})
		if a.skip != "" || len(a.means) == 0 {
			if r.Skip == "" {
				r.Skip = "no run succeeded"
			}
			out = append(out, r)
			continue
		}
		scale := 1e6
		if cs.Op == PingPong {
			scale /= 2
		}
		slices.Sort(a.means)
		slices.Sort(a.meds)
		slices.Sort(a.p99s)
		r.Iters, r.Warmup, r.Runs = a.iters, a.warmup, len(a.means)
		r.TimeUS = Median(a.means) * scale
		r.MinUS = slices.Min(a.mins) * scale
		r.MedUS = Median(a.meds) * scale
		r.P99US = Median(a.p99s) * scale
		r.MaxUS = slices.Max(a.maxs) * scale
		r.AlgBW, r.BusBW = cs.Op.Bandwidths(cs.Bytes, r.TimeUS/1e6, n)
		if a.checked {
			r.Wrong = a.wrong
		}
		out = append(out, r)
	}
	return out
}

// WriteComparison prints the comparison: per op, a row per size with each
// series' time and busbw, and the ratios ours/peer; then the figures the
// issue's targets name, and the notes (series not run, runs failed).
func WriteComparison(w io.Writer, m Meta, runs int, results []Result, ours, peers []string, notes []string) {
	fmt.Fprintf(w, "# commbench compare: %d ranks, %s, redop %s, warm-up %d, iterations %d", m.Ranks, m.DType, m.RedOp, m.Warmup, m.Iters)
	if m.Budget > 0 {
		fmt.Fprintf(w, " (at most %s per size)", HumanSize(m.Budget))
	}
	fmt.Fprintf(w, "\n# time: median over %d interleaved runs of each run's loop time per iteration (us); p99: median over the runs of each run's 99th-percentile iteration (us); busbw in GB/s (nccl-tests factors)\n", runs)
	fmt.Fprintln(w, "# ratio ours/peer = our busbw / peer busbw = peer time / our time: above 1, gocomm is faster")
	by := map[string]map[caseKey]Result{}
	for _, r := range results {
		if by[r.Series] == nil {
			by[r.Series] = map[caseKey]Result{}
		}
		by[r.Series][caseKey{r.Op, r.Bytes}] = r
	}
	series := append(append([]string(nil), ours...), peers...)
	ratios := ratioPairs(ours, peers)
	hasAlgo := map[string]bool{} // series with an "alg" column (best-of)
	for _, r := range results {
		if r.Algo != "" {
			hasAlgo[r.Series] = true
		}
	}
	if m.MPIAlgos != "" {
		fmt.Fprintf(w, "# mpi-*-best: per size the fastest of Open MPI's tuned algorithms, each forced in its own run (alg: its K): %s\n", m.MPIAlgos)
	}
	for _, op := range opsOf(results) {
		var keys []caseKey
		seen := map[caseKey]bool{}
		for _, r := range results {
			k := caseKey{r.Op, r.Bytes}
			if r.Op == op && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(a, b caseKey) int { return cmpInt64(a.bytes, b.bytes) })
		head1 := []string{"size"}
		head2 := []string{"(B)"}
		for _, s := range series {
			head1 = append(head1, s, "", "")
			head2 = append(head2, "time", "p99", "busbw")
			if hasAlgo[s] {
				head1 = append(head1, "")
				head2 = append(head2, "alg")
			}
		}
		for _, p := range ratios {
			head1 = append(head1, shortName(p.ours)+"/")
			head2 = append(head2, p.peer)
		}
		won := map[string]bool{} // the winning algorithms of this op, for the footnote
		rows := [][]string{head1, head2}
		for _, k := range keys {
			row := []string{strconv.FormatInt(k.bytes, 10)}
			for _, s := range series {
				r, ok := by[s][k]
				switch {
				case !ok:
					row = append(row, "-", "-", "-")
				case r.Skip != "":
					row = append(row, "n/a", "n/a", "n/a")
				default:
					row = append(row, FormatMicros(r.TimeUS), FormatMicros(r.P99US), fmt.Sprintf("%.3f", r.BusBW))
				}
				if hasAlgo[s] {
					switch {
					case ok && r.Skip == "" && r.Algo != "":
						row = append(row, algoK(r.Algo))
						won[r.Algo] = true
					default:
						row = append(row, "-")
					}
				}
			}
			for _, p := range ratios {
				row = append(row, formatRatio(by[p.ours][k], by[p.peer][k]))
			}
			rows = append(rows, row)
		}
		fmt.Fprintf(w, "#\n# %v\n", op)
		writeAligned(w, rows, 2)
		if len(won) > 0 {
			algos := slices.Collect(maps.Keys(won))
			slices.SortFunc(algos, func(a, b string) int { return cmp.Compare(atoiOr(algoK(a)), atoiOr(algoK(b))) })
			fmt.Fprintf(w, "#   alg = K of coll_tuned_%s_algorithm: %s\n", tunedParam[op], strings.Join(algos, ", "))
		}
	}
	writeHeadlines(w, results, series, ratios)
	if len(notes) > 0 {
		fmt.Fprintln(w, "#\n# notes:")
		for _, n := range notes {
			fmt.Fprintf(w, "#   %s\n", n)
		}
	}
	var checked bool
	var wrong int64
	for _, r := range results {
		if r.Wrong >= 0 && r.Skip == "" {
			checked = true
			wrong += r.Wrong
		}
	}
	if checked {
		fmt.Fprintf(w, "#\n# check: %d wrong elements over every series and run\n", wrong)
	}
}

// writeHeadlines prints, for all-reduce, the headline figures per
// series: latency at the smallest size, busbw at the largest, and the
// best busbw with its size; then the same as ratios ours/peer.
func writeHeadlines(w io.Writer, results []Result, series []string, ratios []ratioPair) {
	type head struct {
		small, large, best Result
		ok                 bool
	}
	heads := map[string]head{}
	for _, r := range results {
		if r.Op != AllReduce || r.Skip != "" || r.TimeUS <= 0 {
			continue
		}
		h := heads[r.Series]
		if !h.ok || r.Bytes < h.small.Bytes {
			h.small = r
		}
		if !h.ok || r.Bytes > h.large.Bytes {
			h.large = r
		}
		if !h.ok || r.BusBW > h.best.BusBW {
			h.best = r
		}
		h.ok = true
		heads[r.Series] = h
	}
	if len(heads) == 0 {
		return
	}
	fmt.Fprintln(w, "#\n# allreduce headlines (ratio rows: ours/peer as above, latency included: above 1, gocomm is faster)")
	rows := [][]string{{"series", "latency at smallest size", "busbw at largest size", "best busbw"}}
	for _, s := range series {
		h, ok := heads[s]
		if !ok {
			continue
		}
		rows = append(rows, []string{
			s,
			FormatMicros(h.small.TimeUS) + " us @ " + HumanSize(h.small.Bytes),
			fmt.Sprintf("%.3f GB/s @ %s", h.large.BusBW, HumanSize(h.large.Bytes)),
			fmt.Sprintf("%.3f GB/s @ %s", h.best.BusBW, HumanSize(h.best.Bytes)),
		})
	}
	for _, p := range ratios {
		a, b := heads[p.ours], heads[p.peer]
		if !a.ok || !b.ok {
			continue
		}
		rows = append(rows, []string{
			p.ours + "/" + p.peer,
			ratioString(b.small.TimeUS / a.small.TimeUS),
			ratioString(a.large.BusBW / b.large.BusBW),
			ratioString(a.best.BusBW / b.best.BusBW),
		})
	}
	writeAligned(w, rows, 1)
}

// formatRatio is a/b in busbw (b's time over a's), or "-" when either is
// missing.
func formatRatio(a, b Result) string {
	if a.Skip != "" || b.Skip != "" || a.TimeUS <= 0 || b.TimeUS <= 0 {
		return "-"
	}
	return ratioString(b.TimeUS / a.TimeUS)
}

func ratioString(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0) || x <= 0:
		return "-"
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	case x < 0.01:
		return fmt.Sprintf("%.1gx", x) // two decimals would print 0.00x
	}
	return fmt.Sprintf("%.2fx", x)
}

// atoiOr is s as an int, or 0.
func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// shortName drops the "gocomm-" prefix for the ratio headers.
func shortName(s string) string { return strings.TrimPrefix(s, "gocomm-") }

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeAligned prints rows as right-aligned columns, each line starting
// with "#" for the first headers rows and a space otherwise.
func writeAligned(w io.Writer, rows [][]string, headers int) {
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(c))
		}
	}
	for ri, row := range rows {
		var b strings.Builder
		if ri < headers {
			b.WriteByte('#')
		} else {
			b.WriteByte(' ')
		}
		for i, c := range row {
			b.WriteString(strings.Repeat(" ", widths[i]-len(c)+2))
			b.WriteString(c)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
