package bench

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// Transport is how commbench's ranks are connected.
type Transport uint8

// Transports.
const (
	// TransportAuto: one process per rank, connected as the library
	// connects a program that does not choose (comm.Options.Transport.Kind zero
	// and GOCOMM_TRANSPORT, by default "auto": shared memory between
	// ranks of one host, TCP between hosts). commbench's default, so that
	// a first measurement is of what a program will run.
	TransportAuto Transport = iota
	// TransportTCP: one process per rank, connected over TCP only.
	TransportTCP
	// TransportInproc: every rank a goroutine of this process, connected
	// by in-memory channels (comm.NewLocalWorld).
	TransportInproc
	// TransportSHM: one process per rank over the shared-memory path.
	TransportSHM
)

var transportNames = [...]string{TransportAuto: "auto", TransportTCP: "tcp", TransportInproc: "inproc", TransportSHM: "shm"}

func (t Transport) String() string {
	if int(t) < len(transportNames) {
		return transportNames[t]
	}
	return fmt.Sprintf("Transport(%d)", uint8(t))
}

// Set implements flag.Value.
func (t *Transport) Set(s string) error {
	for i, n := range transportNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			*t = Transport(i)
			return nil
		}
	}
	return fmt.Errorf("unknown transport %q (want auto, tcp, shm or inproc)", s)
}

// ErrHelp is returned by ParseArgs when -h or --help was given; the usage
// has then been written.
var ErrHelp = flag.ErrHelp

// Config is one commbench run, as the command line gives it.
type Config struct {
	Ranks     int // -n: ranks to start when no launcher started this process
	Backend   string
	Transport Transport
	Sweep     SweepConfig
	DType     comm.DType
	RedOp     comm.ReduceOp
	Check     bool
	Shared    bool // --shared-buffers
	InPlace   bool // --in-place
	Algo      core.Algorithms
	AlgoText  string        // --algo as given, for the header
	Timeout   time.Duration // bound of each operation
	Series    string        // label of this run's results
	JSON      string        // output files ("" for none)
	CSV       string
	Plot      string
	Quiet     bool   // no progress line
	PlanFile  string // run this plan instead of the sweep flags
	RawFile   string // write raw samples here (comparison mode)
	Command   string // the command line, for the JSON
	ranksSet  bool   // -n was given
	seriesSet bool   // --series was given
}

// algoKinds maps --algo keys to the Algorithms field they set.
var algoKinds = map[string]func(*core.Algorithms) *algo.Algorithm{
	"allreduce":     func(a *core.Algorithms) *algo.Algorithm { return &a.AllReduce },
	"reduce":        func(a *core.Algorithms) *algo.Algorithm { return &a.Reduce },
	"broadcast":     func(a *core.Algorithms) *algo.Algorithm { return &a.Broadcast },
	"bcast":         func(a *core.Algorithms) *algo.Algorithm { return &a.Broadcast },
	"allgather":     func(a *core.Algorithms) *algo.Algorithm { return &a.AllGather },
	"reducescatter": func(a *core.Algorithms) *algo.Algorithm { return &a.ReduceScatter },
	"gather":        func(a *core.Algorithms) *algo.Algorithm { return &a.Gather },
	"scatter":       func(a *core.Algorithms) *algo.Algorithm { return &a.Scatter },
	"alltoall":      func(a *core.Algorithms) *algo.Algorithm { return &a.AllToAll },
	"barrier":       func(a *core.Algorithms) *algo.Algorithm { return &a.Barrier },
}

// ParseAlgorithms parses --algo: comma-separated op=algorithm pairs, such
// as allreduce=ring,broadcast=tree.
func ParseAlgorithms(s string) (core.Algorithms, error) {
	var a core.Algorithms
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, fmt.Errorf("--algo %q: want op=algorithm, e.g. allreduce=ring", kv)
		}
		field, ok := algoKinds[strings.ToLower(strings.TrimSpace(k))]
		if !ok {
			keys := make([]string, 0, len(algoKinds))
			for k := range algoKinds {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return a, fmt.Errorf("--algo: unknown op %q (want one of %s)", k, strings.Join(keys, ", "))
		}
		alg, err := algo.ParseAlgorithm(v)
		if err != nil {
			return a, fmt.Errorf("--algo %s: %w", kv, err)
		}
		*field(&a) = alg
	}
	return a, nil
}

// sizeFlag is a flag.Value for byte counts with suffixes.
type sizeFlag struct{ p *int64 }

func (s sizeFlag) String() string {
	if s.p == nil {
		return ""
	}
	return FormatSize(*s.p)
}

func (s sizeFlag) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s.p = n
	return nil
}

// Usage is commbench's help text, formulas included.
const usageText = `commbench measures gocomm's collectives as nccl-tests does.

Usage:
  commbench [flags]                 start -n ranks on this host (or join the world
                                    of commrun, torchrun or mpirun) and sweep sizes;
                                    ranks connect as any gocomm program's do unless
                                    --transport says otherwise (auto: shared memory
                                    on one host, TCP between hosts; the series label,
                                    e.g. native/auto-shm, says what was used)
  commbench compare [flags]         the same sweep for gocomm, Open MPI and gloo side
                                    by side, with ratios (commbench compare -h)

Examples:
  commbench -n 2 -b 8 -e 64M -f 2 --op allreduce --check
  commbench -n 4 --op all -b 1K -e 16M --json out.json --plot out.svg
  commbench -n 2 --op allreduce,broadcast@64M,alltoall@64M
  commrun -n 4 -- commbench -e 1M

Columns (rank 0 prints them; one row per size):
  size    S in bytes: the all-reduce, broadcast and reduce buffer; the all-gather
          output and the reduce-scatter input (n blocks); the all-to-all send
          buffer; the message of send/recv and ping-pong
  count   elements in S;  type, redop, root (-1: none)
  time    the timed loop's duration divided by its iterations, in
          microseconds, the slowest rank's (as nccl-tests and OSU report);
          min, median and max of single iterations, each its slowest rank's,
          are in the JSON and CSV. ping-pong: half the round trip
  algbw   S / time, GB/s (1e9 bytes/s)
  busbw   algbw * factor, nccl-tests' bus bandwidth, for n ranks:
            allreduce                   2(n-1)/n
            reducescatter, allgather    (n-1)/n
            alltoall                    (n-1)/n
            broadcast, reduce           1
            sendrecv, pingpong          1
            onebit                      2(n-1)/n
          onebit's S is its float32 input, not the ~S/32 bytes it sends: its
          algbw is the rate it averages float32 data at, its busbw what a plain
          all-reduce would need to match it (so it can exceed the link speed)
  #wrong  with --check, elements that differ from the expected result over all
          ranks (onebit: elements that differ between ranks) (N/A without)

Ops: allreduce, reduce, broadcast, allgather, reducescatter, alltoall,
sendrecv (each rank sends to rank+1 and receives from rank-1 at once),
pingpong (ranks 0 and 1), barrier; or all. onebit (float32 only, not in
all): onebit.AllReduce, DeepSpeed's 1-bit error-compensated all-reduce, in
place, one error state per size. op@size or op@min:max gives an op its own
sizes.

Flags:
`

// ParseArgs parses commbench's command line (without the program name).
// On -h it writes the usage to out and returns ErrHelp.
func ParseArgs(args []string, out io.Writer) (Config, error) {
	cfg := Config{
		Ranks: 2, Backend: "native", DType: core.Float32, RedOp: core.Sum,
		Sweep:   SweepConfig{Min: 8, Max: 64 << 20, Factor: 2, Warmup: 5, Iters: 20},
		Timeout: 5 * time.Minute, Command: "commbench " + strings.Join(args, " "),
	}
	fs := flag.NewFlagSet("commbench", flag.ContinueOnError)
	fs.SetOutput(out)
	var ops, dtype, redop string
	fs.IntVar(&cfg.Ranks, "n", cfg.Ranks, "ranks to start on this host when no launcher started commbench")
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "backend driver (registered: "+strings.Join(backend.Drivers(), ", ")+")")
	fs.Var(&cfg.Transport, "transport", "how ranks connect: auto (processes, the library's default: shared memory on one host, TCP between hosts; GOCOMM_TRANSPORT applies), tcp (processes, TCP only), shm (processes, shared memory) or inproc (goroutines)")
	for _, name := range []string{"b", "minbytes"} {
		fs.Var(sizeFlag{&cfg.Sweep.Min}, name, "smallest size S (K, M, G suffixes, powers of 1024)")
	}
	for _, name := range []string{"e", "maxbytes"} {
		fs.Var(sizeFlag{&cfg.Sweep.Max}, name, "largest size S")
	}
	for _, name := range []string{"f", "stepfactor"} {
		fs.Float64Var(&cfg.Sweep.Factor, name, cfg.Sweep.Factor, "multiply the size by this factor between steps")
	}
	fs.Var(sizeFlag{&cfg.Sweep.Step}, "step", "add this many bytes between steps (with -f 1)")
	fs.StringVar(&ops, "op", "allreduce", "ops to run, comma-separated, or all; op@size or op@min:max for an op's own sizes")
	for _, name := range []string{"d", "datatype"} {
		fs.StringVar(&dtype, name, "float32", "element type: float32, float64, float16, bfloat16, int8..int64, uint8..uint64")
	}
	for _, name := range []string{"o", "redop"} {
		fs.StringVar(&redop, name, "sum", "reduction: sum, prod, min, max, avg (band, bor, bxor for integers)")
	}
	for _, name := range []string{"w", "warmup"} {
		fs.IntVar(&cfg.Sweep.Warmup, name, cfg.Sweep.Warmup, "warm-up iterations per size")
	}
	for _, name := range []string{"i", "iters"} {
		fs.IntVar(&cfg.Sweep.Iters, name, cfg.Sweep.Iters, "timed iterations per size")
	}
	fs.Var(sizeFlag{&cfg.Sweep.Budget}, "budget", "cap iterations*size per size (e.g. 1G; at least 5 iterations stay); 0: no cap")
	for _, name := range []string{"r", "root"} {
		fs.IntVar(&cfg.Sweep.Root, name, 0, "root of broadcast and reduce")
	}
	fs.BoolVar(&cfg.Shared, "shared-buffers", false, "allocate the buffers with comm.AllocShared (memory every rank on the host maps; all-reduces then read inputs in place)")
	fs.BoolVar(&cfg.InPlace, "in-place", false, "all-reduce in place (one buffer as send and recv)")
	for _, name := range []string{"c", "check"} {
		fs.BoolVar(&cfg.Check, name, false, "fill inputs with known values and verify every result")
	}
	fs.StringVar(&cfg.AlgoText, "algo", "", "force algorithms: op=algorithm,... (ring, recursive-doubling (rd), halving-doubling (hd), tree, pairwise, linear)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of each operation")
	fs.StringVar(&cfg.Series, "series", "", "label of this run in the outputs (default backend/transport, e.g. native/auto-shm: auto and what it chose)")
	fs.StringVar(&cfg.JSON, "json", "", "write the results as JSON to this file")
	fs.StringVar(&cfg.CSV, "csv", "", "write the results as CSV to this file")
	fs.StringVar(&cfg.Plot, "plot", "", "draw busbw against size as SVG to this file")
	for _, name := range []string{"q", "quiet"} {
		fs.BoolVar(&cfg.Quiet, name, false, "no progress line on stderr")
	}
	fs.StringVar(&cfg.PlanFile, "plan", "", "run the cases of this plan file instead of the sweep flags (comparison mode)")
	fs.StringVar(&cfg.RawFile, "raw", "", "write every iteration's time to this file (comparison mode)")
	if err := parseFlags(fs, out, usageText, args); err != nil {
		return cfg, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "n":
			cfg.ranksSet = true
		case "series":
			cfg.seriesSet = true
		}
	})
	var err error
	if cfg.Sweep.Ops, err = ParseOpSpecs(ops); err != nil {
		return cfg, fmt.Errorf("commbench: --op: %w", err)
	}
	if cfg.DType, err = ParseDType(dtype); err != nil {
		return cfg, fmt.Errorf("commbench: -d: %w", err)
	}
	if cfg.RedOp, err = ParseRedOp(redop); err != nil {
		return cfg, fmt.Errorf("commbench: -o: %w", err)
	}
	if cfg.Algo, err = ParseAlgorithms(cfg.AlgoText); err != nil {
		return cfg, fmt.Errorf("commbench: %w", err)
	}
	if cfg.Ranks < 1 {
		return cfg, fmt.Errorf("commbench: -n %d: want at least 1 rank", cfg.Ranks)
	}
	if cfg.Timeout <= 0 {
		return cfg, fmt.Errorf("commbench: --timeout %v: want a positive duration", cfg.Timeout)
	}
	if cfg.Series == "" {
		// With the auto transport, runOn adds what it chose once the
		// ranks have met (seriesLabel).
		cfg.Series = cfg.Backend + "/" + cfg.Transport.String()
		cfg.seriesSet = false
	}
	if cfg.PlanFile == "" {
		// Validate the sweep now, before any rank starts.
		// Under a launcher the world size is only known after Init; a
		// root beyond -n is then checked again there.
		n := cfg.Ranks
		if !cfg.ranksSet {
			n = max(n, cfg.Sweep.Root+1)
		}
		if _, err := BuildPlan(cfg.Sweep, cfg.DType, cfg.RedOp, cfg.Check, n); err != nil {
			return cfg, fmt.Errorf("commbench: %w", err)
		}
	}
	return cfg, nil
}

// parseFlags parses args with fs, whose name is the command's ("commbench
// ddp"), printing usage and the flags to out on -h; arguments that are not
// flags are an error.
func parseFlags(fs *flag.FlagSet, out io.Writer, usage string, args []string) error {
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (flags only; see -h)", fs.Name(), fs.Arg(0))
	}
	return nil
}
