package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/launch"
)

// progressEvery is how often, at most, the progress line is printed; a
// sweep shorter than this prints none.
const progressEvery = 2 * time.Second

// Main is commbench's command line (without the program name); it returns
// the exit status: 0, 1 for a failed run, 2 for a bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		return CompareMain(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "ddp" {
		return DDPMain(ctx, args[1:], stdout, stderr)
	}
	cfg, err := ParseArgs(args, stderr)
	if errors.Is(err, ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := Execute(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// Execute runs cfg: with the inproc transport every rank is a goroutine of
// this process; otherwise, under a launcher this process is one rank of
// the launcher's world, and without one it starts cfg.Ranks copies of
// itself (launch.Spawn) and waits for them. Rank 0 writes the table to
// stdout and the output files.
func Execute(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	launched := launch.Launched(nil)
	opts := comm.Options{Backend: cfg.Backend, Algorithms: cfg.Algo, Timeout: cfg.Timeout}
	if err := selectTransport(cfg.Transport, &opts); err != nil {
		return err
	}
	switch {
	case cfg.Transport == TransportInproc && launched:
		return errors.New("commbench: --transport inproc runs every rank in this process: start it without a launcher")
	case cfg.Transport == TransportInproc:
		return runInproc(ctx, cfg, opts, stdout, stderr)
	case !launched && cfg.Ranks > 1:
		_, err := launch.SpawnConfig(ctx, launch.Config{
			NProcs: cfg.Ranks, Name: "commbench",
			Stdout: rankZeroWriter{stdout}, Stderr: rankZeroWriter{stderr},
		})
		return err
	}
	c, err := comm.Init(ctx, opts)
	if err != nil {
		return fmt.Errorf("commbench: %w", err)
	}
	defer c.Close()
	if cfg.ranksSet && launched && cfg.Ranks != c.Size() && c.Rank() == 0 {
		fmt.Fprintf(stderr, "commbench: -n %d ignored: the launcher started %d ranks\n", cfg.Ranks, c.Size())
	}
	if c.Rank() != 0 {
		stdout = io.Discard
	}
	return runOn(ctx, cfg, c, stdout, stderr)
}

// runInproc runs every rank as a goroutine over in-memory channels.
func runInproc(ctx context.Context, cfg Config, opts comm.Options, stdout, stderr io.Writer) error {
	world, err := comm.NewLocalWorld(cfg.Ranks, opts)
	if err != nil {
		return fmt.Errorf("commbench: %w", err)
	}
	errs := make([]error, len(world))
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := stdout
			if r != 0 {
				out = io.Discard
			}
			if errs[r] = runOn(ctx, cfg, c, out, stderr); errs[r] != nil {
				c.Abort(errs[r])
			}
		}()
	}
	wg.Wait()
	for _, c := range world {
		c.Close()
	}
	// Rank 0's error first: the others usually only saw the abort.
	return errors.Join(errs...)
}

// runOn runs the plan on c; rank 0 reports.
func runOn(ctx context.Context, cfg Config, c *comm.Comm, stdout, stderr io.Writer) error {
	n := c.Size()
	plan, err := loadPlan(cfg, n)
	if err != nil {
		return err
	}
	plan.Shared, plan.InPlace = cfg.Shared, cfg.InPlace
	mode := os.Getenv(transportEnv) // what Init read, for the label only
	if !cfg.seriesSet {
		cfg.Series = seriesLabel(cfg.Transport, cfg.Backend, mode, c.NodeCount(), n)
	}
	meta := Meta{
		Series: cfg.Series, Backend: cfg.Backend, Transport: describeTransport(cfg.Transport, cfg.Backend, mode, c.NodeCount(), n), Ranks: n,
		DType: plan.DType.String(), RedOp: RedOpName(plan.RedOp), Warmup: cfg.Sweep.Warmup, Iters: cfg.Sweep.Iters,
		Budget: cfg.Sweep.Budget, Check: plan.Check, Algo: cfg.AlgoText, GoVersion: runtime.Version(),
		Started: time.Now().Format(time.RFC3339), Command: cfg.Command,
	}
	switch {
	case plan.Shared && plan.InPlace:
		meta.Buffers = "shared, all-reduce in place"
	case plan.Shared:
		meta.Buffers = "shared"
	case plan.InPlace:
		meta.Buffers = "all-reduce in place"
	}
	meta.Host, _ = os.Hostname()
	var results []Result
	table := NewTableWriter(stdout)
	var hooks *Hooks
	if c.Rank() == 0 {
		table.Header(meta)
		prog := newProgress(stderr, len(plan.Cases), cfg.Quiet)
		hooks = &Hooks{
			Start: prog.step,
			Done: func(_ int, s Sample) {
				r := Summarize(cfg.Series, n, plan.DType, plan.RedOp, s)
				results = append(results, r)
				table.Row(r)
			},
		}
	}
	samples, err := Run(ctx, c, plan, hooks)
	if err != nil {
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	table.Footer(results)
	if cfg.RawFile != "" {
		if err := writeFile(cfg.RawFile, func(w io.Writer) error { return WriteRaw(w, n, samples) }); err != nil {
			return err
		}
	}
	if err := writeOutputs(cfg.JSON, cfg.CSV, cfg.Plot, plotTitle(meta), []Meta{meta}, results); err != nil {
		return err
	}
	var wrong int64
	for _, r := range results {
		wrong += max(r.Wrong, 0)
	}
	if wrong > 0 {
		return fmt.Errorf("commbench: --check found %d wrong elements", wrong)
	}
	return nil
}

func plotTitle(m Meta) string {
	return fmt.Sprintf("commbench: %d ranks, %s, %s", m.Ranks, m.DType, m.Series)
}

// loadPlan reads cfg.PlanFile or builds the plan of the sweep flags.
func loadPlan(cfg Config, n int) (Plan, error) {
	if cfg.PlanFile == "" {
		p, err := BuildPlan(cfg.Sweep, cfg.DType, cfg.RedOp, cfg.Check, n)
		if err != nil {
			return p, fmt.Errorf("commbench: %w", err)
		}
		return p, nil
	}
	f, err := os.Open(cfg.PlanFile)
	if err != nil {
		return Plan{}, fmt.Errorf("commbench: --plan: %w", err)
	}
	defer f.Close()
	p, err := ParsePlan(f)
	if err != nil {
		return p, fmt.Errorf("commbench: --plan %s: %w", cfg.PlanFile, err)
	}
	for _, cs := range p.Cases {
		if _, ok := LayoutOf(cs.Op, cs.Bytes, p.DType.Size(), n); !ok || (cs.Op.Rooted() && cs.Root >= n) {
			return p, fmt.Errorf("commbench: --plan %s: %v of %d bytes (root %d) does not fit %d ranks", cfg.PlanFile, cs.Op, cs.Bytes, cs.Root, n)
		}
	}
	return p, nil
}

// writeOutputs writes the JSON, CSV and SVG files that are named.
func writeOutputs(jsonPath, csvPath, plotPath, title string, metas []Meta, results []Result) error {
	if jsonPath != "" {
		if err := writeFile(jsonPath, func(w io.Writer) error { return WriteJSON(w, metas, results) }); err != nil {
			return err
		}
	}
	if csvPath != "" {
		if err := writeFile(csvPath, func(w io.Writer) error { return WriteCSV(w, results) }); err != nil {
			return err
		}
	}
	if plotPath != "" {
		if err := writeFile(plotPath, func(w io.Writer) error { return WritePlot(w, title, results) }); err != nil {
			return err
		}
	}
	return nil
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("commbench: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("commbench: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("commbench: writing %s: %w", path, err)
	}
	return nil
}

// progress prints, at most every progressEvery, which case a long sweep
// is at.
type progress struct {
	w           io.Writer
	total       int
	start, last time.Time
	off         bool
}

func newProgress(w io.Writer, total int, quiet bool) *progress {
	now := time.Now()
	return &progress{w: w, total: total, start: now, last: now, off: quiet}
}

func (p *progress) step(i int, cs Case) {
	if p.off {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "commbench: case %d/%d: %v %s, %s elapsed\n", i+1, p.total, cs.Op, HumanSize(cs.Bytes), now.Sub(p.start).Round(time.Second))
}

// rankZeroWriter passes on what launch.Run prints, dropping the "[0] "
// prefix from rank 0's lines (which are commbench's report) and keeping
// the other ranks' prefixes (which are their errors). launch.Run writes
// one whole line per call.
type rankZeroWriter struct{ w io.Writer }

func (r rankZeroWriter) Write(p []byte) (int, error) {
	if rest, ok := bytes.CutPrefix(p, []byte("[0] ")); ok {
		_, err := r.w.Write(rest)
		return len(p), err
	}
	return r.w.Write(p)
}

// joinArgs quotes args for display.
func joinArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
