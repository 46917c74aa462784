package bench

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/models"
	"github.com/gocomm/comm/launch"
)

// The Python peer of commbench ddp: torch's DistributedDataParallel on gloo.
//
//go:embed peers/ddp_bench.py
var ddpHarness []byte

// Series of commbench ddp.
const (
	SeriesTorchGloo = "torch-gloo"
)

// DDPSeries is every series commbench ddp runs by default.
var DDPSeries = []string{SeriesGocommSHM, SeriesGocommTCP, SeriesTorchGloo}

// DDPConfig is a commbench ddp run.
type DDPConfig struct {
	Models        []string // models.ByName names
	Ranks         int
	Series        []string
	Modes         []string // gocomm's modes (ModePerTensor, ModeReducer, ModeFlat)
	Warmup, Iters int
	Runs          int
	Check         bool
	Overlap       bool
	ComputeFactor float64
	ComputeKind   string
	Python        string
	Timeout       time.Duration
	WorkDir       string
	Quiet         bool
	Command       string

	// One rank of a gocomm job (the orchestrator starts these under a
	// launcher; a user may too, under commrun or mpirun).
	Transport    Transport
	RawFile      string
	Rotate       int  // rotate Modes left by this much
	OverlapFirst bool // run ModeOverlap before ModeCompute
}

const ddpUsage = `commbench ddp times data-parallel gradient reduction: one training step's
gradient averaging for the gradient lists of real models, four ways:

  (a) pertensor  one all-reduce per gradient, as each is produced
  (b) reducer    ddp.Reducer: Ready(i) as each gradient is produced, Wait at the end
  (c) flat       one all-reduce of one vector holding every gradient (the bound)
  (d) ddp        torch's DistributedDataParallel on gloo with the same shapes
                 (peers/ddp_bench.py): the step with DDP minus the same step
                 without it (torch-gloo's "plain")

Models: resnet50 (torchvision's, 161 tensors, 25.6 M params), bert-base
(bert-base-uncased, 199 tensors, 109.5 M), small1000 (1,000 tensors of 1-4 KiB),
smallN (N such tensors). Gradients are float32, averaged, produced in reverse
registration order.

Series gocomm-shm and gocomm-tcp run (a), (b), (c) in one job each; torch-gloo
runs (d), the step without DDP, and (a) and (c) with dist.all_reduce. The
series take turns run after run in a rotating order (and gocomm's modes rotate
within their job); a time is the median over the runs of each run's mean step,
the slowest rank's; a ratio is the median over the runs of that run's ratio.

--overlap adds the simulated backward: per gradient, compute proportional to
its size (--compute-kind spin: a busy loop on this rank's CPU; sleep: the CPU
left free, as when an accelerator computes), in total --compute times this
job's flat all-reduce step; "compute" times it alone and "overlap" with the
Reducer marking each gradient Ready as its layer ends; exposed communication
= overlap - compute.

Under a launcher (commrun, torchrun, mpirun) commbench ddp is one rank of a
gocomm job and runs one model (--transport, --raw).

Example:
  commbench ddp -n 2 --model resnet50,bert-base,small1000 --runs 3 --overlap

Flags:
`

// ParseDDPArgs parses commbench ddp's command line.
func ParseDDPArgs(args []string, out io.Writer) (DDPConfig, error) {
	cfg := DDPConfig{
		Ranks: 2, Warmup: 3, Iters: 10, Runs: 3, ComputeFactor: 1, ComputeKind: ComputeSpin,
		Python: "/usr/bin/python3", Timeout: 15 * time.Minute, Transport: TransportAuto,
		Command: "commbench ddp " + joinArgs(args),
	}
	fs := flag.NewFlagSet("commbench ddp", flag.ContinueOnError)
	fs.SetOutput(out)
	var model, series, modes string
	fs.StringVar(&model, "model", strings.Join(models.Names, ","), "models, comma-separated: resnet50, bert-base, small1000, smallN")
	fs.IntVar(&cfg.Ranks, "n", cfg.Ranks, "ranks")
	fs.StringVar(&series, "series", strings.Join(DDPSeries, ","), "series, comma-separated: "+strings.Join(DDPSeries, ", "))
	fs.StringVar(&modes, "modes", strings.Join([]string{ModePerTensor, ModeReducer, ModeFlat}, ","), "gocomm's modes, comma-separated; also flatshared: flat from comm.AllocShared")
	for _, name := range []string{"w", "warmup"} {
		fs.IntVar(&cfg.Warmup, name, cfg.Warmup, "untimed steps per mode")
	}
	for _, name := range []string{"i", "iters"} {
		fs.IntVar(&cfg.Iters, name, cfg.Iters, "timed steps per mode")
	}
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs of every series, interleaved (medians are reported)")
	for _, name := range []string{"c", "check"} {
		fs.BoolVar(&cfg.Check, name, false, "verify one step's reduced gradients per mode")
	}
	fs.BoolVar(&cfg.Overlap, "overlap", false, "add the simulated backward (modes compute and overlap)")
	fs.Float64Var(&cfg.ComputeFactor, "compute", cfg.ComputeFactor, "the simulated backward's total, in flat all-reduce steps")
	fs.StringVar(&cfg.ComputeKind, "compute-kind", cfg.ComputeKind, "the simulated backward: spin (busy CPU) or sleep (CPU free)")
	fs.StringVar(&cfg.Python, "python", cfg.Python, "Python with torch, for the torch-gloo series")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of one run of one series")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "keep model files, the harness and raw results in this directory")
	for _, name := range []string{"q", "quiet"} {
		fs.BoolVar(&cfg.Quiet, name, false, "no progress lines on stderr")
	}
	fs.Var(&cfg.Transport, "transport", "a rank's transport (under a launcher): auto, shm or tcp")
	fs.StringVar(&cfg.RawFile, "raw", "", "a rank job's raw results file (under a launcher)")
	fs.IntVar(&cfg.Rotate, "rotate", 0, "a rank job's rotation of --modes (under a launcher)")
	fs.BoolVar(&cfg.OverlapFirst, "overlap-first", false, "a rank job runs overlap before compute (under a launcher)")
	if err := parseFlags(fs, out, ddpUsage, args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.Models, err = splitList(model); err != nil {
		return cfg, fmt.Errorf("commbench ddp: --model: %w", err)
	}
	for _, m := range cfg.Models {
		if _, err := modelByName(m); err != nil {
			return cfg, fmt.Errorf("commbench ddp: --model: %w", err)
		}
	}
	if cfg.Series, err = splitList(series); err != nil {
		return cfg, fmt.Errorf("commbench ddp: --series: %w", err)
	}
	for _, s := range cfg.Series {
		if !slices.Contains(DDPSeries, s) {
			return cfg, fmt.Errorf("commbench ddp: --series: unknown series %q (want some of %s)", s, strings.Join(DDPSeries, ", "))
		}
	}
	if cfg.Modes, err = splitList(modes); err != nil {
		return cfg, fmt.Errorf("commbench ddp: --modes: %w", err)
	}
	for _, m := range cfg.Modes {
		if !slices.Contains([]string{ModePerTensor, ModeReducer, ModeFlat, ModeFlatShared}, m) {
			return cfg, fmt.Errorf("commbench ddp: --modes: unknown mode %q (want some of pertensor, reducer, flat, flatshared)", m)
		}
	}
	switch {
	case cfg.Ranks < 1:
		return cfg, fmt.Errorf("commbench ddp: -n %d: want at least 1 rank", cfg.Ranks)
	case cfg.Warmup < 0 || cfg.Iters < 1:
		return cfg, fmt.Errorf("commbench ddp: -w %d -i %d: want at least 0 warm-ups and 1 step", cfg.Warmup, cfg.Iters)
	case cfg.Runs < 1:
		return cfg, fmt.Errorf("commbench ddp: --runs %d: want at least 1", cfg.Runs)
	case cfg.ComputeKind != ComputeSpin && cfg.ComputeKind != ComputeSleep:
		return cfg, fmt.Errorf("commbench ddp: --compute-kind %q: want spin or sleep", cfg.ComputeKind)
	case cfg.ComputeFactor < 0 || math.IsNaN(cfg.ComputeFactor):
		return cfg, fmt.Errorf("commbench ddp: --compute %v: want a factor >= 0", cfg.ComputeFactor)
	case cfg.Transport == TransportInproc:
		return cfg, errors.New("commbench ddp: --transport inproc: ranks are processes here (auto, shm or tcp)")
	case cfg.Timeout <= 0:
		return cfg, fmt.Errorf("commbench ddp: --timeout %v: want a positive duration", cfg.Timeout)
	}
	return cfg, nil
}

// splitList splits a comma-separated list, refusing duplicates and an
// empty list.
func splitList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("%q given twice", f)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// modelByName is models.ByName, plus "smallN": N tensors of 1-4 KiB.
func modelByName(name string) (models.Model, error) {
	if rest, ok := strings.CutPrefix(name, "small"); ok && name != models.NameSmall {
		if k, err := strconv.Atoi(rest); err == nil && k > 0 && k <= 1_000_000 {
			return models.SmallTensors(k), nil
		}
	}
	return models.ByName(name)
}

// DDPMain is commbench ddp's command line.
func DDPMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseDDPArgs(args, stderr)
	if errors.Is(err, ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if launch.Launched(nil) {
		err = DDPRank(ctx, cfg, stdout)
	} else {
		err = DDPCompare(ctx, cfg, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// DDPRank runs one gocomm job's rank: the first of cfg.Models, on the
// launcher's world. Rank 0 writes the raw results (cfg.RawFile) and a
// short table.
func DDPRank(ctx context.Context, cfg DDPConfig, stdout io.Writer) error {
	m, err := modelByName(cfg.Models[0])
	if err != nil {
		return err
	}
	opts := comm.Options{Timeout: cfg.Timeout}
	if err := selectTransport(cfg.Transport, &opts); err != nil {
		return err
	}
	c, err := comm.Init(ctx, opts)
	if err != nil {
		return fmt.Errorf("commbench ddp: %w", err)
	}
	defer c.Close()
	k := cfg.Rotate % len(cfg.Modes)
	modes := append(slices.Clone(cfg.Modes[k:]), cfg.Modes[:k]...)
	samples, err := RunDDP(ctx, c, DDPRankConfig{
		Model: m, Modes: modes, Warmup: cfg.Warmup, Iters: cfg.Iters, Check: cfg.Check,
		Overlap: cfg.Overlap, ComputeFactor: cfg.ComputeFactor, ComputeKind: cfg.ComputeKind, OverlapFirst: cfg.OverlapFirst,
	})
	if err != nil {
		c.Abort(err)
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	if cfg.RawFile != "" {
		if err := writeFile(cfg.RawFile, func(w io.Writer) error { return WriteDDPRaw(w, c.Size(), m.Name, samples) }); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "# commbench ddp: %s, %d ranks, transport %s, %d warm-ups, %d steps\n", m.Name, c.Size(), cfg.Transport, cfg.Warmup, cfg.Iters)
	for _, s := range samples {
		fmt.Fprintf(stdout, "%-10s  %12s ms  wrong %d\n", s.Mode, formatMillis(s.Loop), s.Wrong)
	}
	return nil
}

func formatMillis(sec float64) string { return strconv.FormatFloat(sec*1e3, 'f', 3, 64) }

const ddpRawHeader = "gocomm-ddp-raw 1"

// WriteDDPRaw writes one job's samples: a header, "ranks N", "model
// NAME", then per mode "mode NAME WRONG LOOP_US COMPUTE_US T1_US T2_US
// ...". peers/ddp_bench.py writes the same.
func WriteDDPRaw(w io.Writer, ranks int, model string, samples []DDPSample) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\nranks %d\nmodel %s\n", ddpRawHeader, ranks, model)
	us := func(s float64) string { return strconv.FormatFloat(s*1e6, 'g', 9, 64) }
	for _, s := range samples {
		fmt.Fprintf(bw, "mode %s %d %s %s", s.Mode, s.Wrong, us(s.Loop), us(s.Compute))
		for _, t := range s.Times {
			bw.WriteString(" " + us(t))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// ParseDDPRaw reads what WriteDDPRaw wrote.
func ParseDDPRaw(r io.Reader) (ranks int, model string, samples []DDPSample, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	line := 0
	bad := func(format string, args ...any) (int, string, []DDPSample, error) {
		return 0, "", nil, fmt.Errorf("ddp raw results, line %d: "+format, append([]any{line}, args...)...)
	}
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		switch {
		case line == 1:
			if sc.Text() != ddpRawHeader {
				return bad("not a ddp raw results file (want %q)", ddpRawHeader)
			}
		case len(f) == 0:
		case f[0] == "ranks" && len(f) == 2:
			if ranks, err = strconv.Atoi(f[1]); err != nil || ranks < 1 {
				return bad("bad rank count %q", f[1])
			}
		case f[0] == "model" && len(f) == 2:
			model = f[1]
		case f[0] == "mode" && len(f) >= 5:
			s := DDPSample{Mode: f[1]}
			if s.Wrong, err = strconv.ParseInt(f[2], 10, 64); err != nil {
				return bad("bad wrong count %q", f[2])
			}
			var xs []float64
			for _, v := range f[3:] {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
					return bad("bad time %q", v)
				}
				xs = append(xs, x/1e6)
			}
			s.Loop, s.Compute, s.Times = xs[0], xs[1], xs[2:]
			samples = append(samples, s)
		default:
			return bad("unexpected %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", nil, err
	}
	if line == 0 {
		return 0, "", nil, errors.New("ddp raw results: empty file")
	}
	return ranks, model, samples, nil
}

// DDPCompare runs every model of cfg through every series, run after run
// in a rotating order, and prints a table per model.
func DDPCompare(ctx context.Context, cfg DDPConfig, stdout, stderr io.Writer) error {
	dir := cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "commbench-ddp-")
		if err != nil {
			return fmt.Errorf("commbench ddp: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("commbench ddp: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("commbench ddp: cannot find this executable to start gocomm's ranks: %w", err)
	}
	logf := func(format string, args ...any) {
		if !cfg.Quiet {
			fmt.Fprintf(stderr, "commbench ddp: "+format+"\n", args...)
		}
	}
	script := filepath.Join(dir, "ddp_bench.py")
	var notes []string
	var active []string
	for _, s := range cfg.Series {
		if s == SeriesTorchGloo {
			if err := setupTorchDDP(ctx, cfg.Python, script); err != nil {
				notes = append(notes, fmt.Sprintf("%s: not run: %v", s, oneLine(err)))
				logf("%s: not run: %v", s, err)
				continue
			}
		}
		active = append(active, s)
	}
	if len(active) == 0 {
		return fmt.Errorf("commbench ddp: no series could run:\n  %s", strings.Join(notes, "\n  "))
	}
	start := time.Now()
	fmt.Fprintf(stdout, "# commbench ddp: %d ranks on %d CPUs%s; %s\n", cfg.Ranks, runtime.NumCPU(), oversubscribed(cfg.Ranks), cfg.Command)
	var failed int
	for _, name := range cfg.Models {
		m, _ := modelByName(name)
		modelPath := filepath.Join(dir, "model-"+m.Name+".txt")
		if err := writeFile(modelPath, func(w io.Writer) error { return models.WriteShapes(w, m) }); err != nil {
			return err
		}
		runs := map[string][][]DDPSample{}
		for _, s := range active {
			runs[s] = make([][]DDPSample, cfg.Runs)
		}
		var mnotes []string
		for run := 0; run < cfg.Runs; run++ {
			for k := range active {
				s := active[(k+run)%len(active)]
				if err := ctx.Err(); err != nil {
					return err
				}
				raw := filepath.Join(dir, fmt.Sprintf("raw-%s-%s-%d.txt", m.Name, s, run+1))
				t0 := time.Now()
				logf("%s run %d/%d: %s ...", m.Name, run+1, cfg.Runs, s)
				var err error
				switch s {
				case SeriesTorchGloo:
					args := []string{script, modelPath, raw, "-w", strconv.Itoa(cfg.Warmup), "-i", strconv.Itoa(cfg.Iters), "--rotate", strconv.Itoa(run)}
					if cfg.Check {
						args = append(args, "--check")
					}
					err = runJob(ctx, "commbench ddp", cfg.Ranks, cfg.Timeout, cfg.Python, args, glooEnv())
				default:
					t := TransportSHM
					if s == SeriesGocommTCP {
						t = TransportTCP
					}
					args := []string{"ddp", "--model", m.Name, "--transport", t.String(), "--raw", raw,
						"--modes", strings.Join(cfg.Modes, ","), "--rotate", strconv.Itoa(run),
						"-w", strconv.Itoa(cfg.Warmup), "-i", strconv.Itoa(cfg.Iters), "--timeout", cfg.Timeout.String()}
					if cfg.Check {
						args = append(args, "--check")
					}
					if cfg.Overlap {
						args = append(args, "--overlap", "--compute", strconv.FormatFloat(cfg.ComputeFactor, 'g', -1, 64), "--compute-kind", cfg.ComputeKind)
						if run%2 == 1 {
							args = append(args, "--overlap-first")
						}
					}
					err = runJob(ctx, "commbench ddp", cfg.Ranks, cfg.Timeout, self, args, nil)
				}
				var samples []DDPSample
				if err == nil {
					samples, err = readDDPRaw(raw, cfg.Ranks, m.Name)
				}
				if err != nil {
					failed++
					mnotes = append(mnotes, fmt.Sprintf("%s: run %d failed: %v", s, run+1, oneLine(err)))
					logf("%s: run %d failed: %v", s, run+1, err)
					continue
				}
				logf("%s run %d/%d: %s done in %s (%s elapsed)", m.Name, run+1, cfg.Runs, s,
					time.Since(t0).Round(100*time.Millisecond), time.Since(start).Round(time.Second))
				runs[s][run] = samples
			}
		}
		rep := AggregateDDP(m, cfg.Ranks, active, runs)
		rep.Notes = append(append(rep.Notes, notes...), mnotes...)
		WriteDDPReport(stdout, rep, cfg)
	}
	if failed > 0 {
		return fmt.Errorf("commbench ddp: %d runs failed", failed)
	}
	return nil
}

// setupTorchDDP writes the Python harness and checks that torch's DDP
// on gloo is there.
func setupTorchDDP(ctx context.Context, python, script string) error {
	return setupPython(ctx, python, script, ddpHarness,
		"import torch.distributed as d, torch.nn.parallel as p; assert d.is_available() and d.is_gloo_available() and p.DistributedDataParallel")
}

func readDDPRaw(path string, n int, model string) ([]DDPSample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no results: %w", err)
	}
	defer f.Close()
	got, gotModel, samples, err := ParseDDPRaw(f)
	switch {
	case err != nil:
		return nil, err
	case got != n:
		return nil, fmt.Errorf("%s: %d ranks ran, want %d", path, got, n)
	case gotModel != model:
		return nil, fmt.Errorf("%s: model %s ran, want %s", path, gotModel, model)
	}
	return samples, nil
}
