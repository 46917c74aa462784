package comm

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/profile"
)

// The comms logger's glue: Options.Profile switches it on, the hook in
// launch times the profiled operations, and the methods below report them.
// Package profile has the formulas, the table, the straggler analysis and
// the trace format.

// profiler is the comms logger of one rank: its world and the world's
// groups share it (Comm.prof).
type profiler struct {
	log       *profile.Logger
	cfg       profile.Config
	worldRank int
	// verbose receives a line per op on world rank 0 in verbose mode; nil
	// otherwise.
	verbose   io.Writer
	verboseMu sync.Mutex // serialises writes to verbose
	// offset is this rank's clock minus the reference rank's, in
	// nanoseconds, from the last clock exchange (0 before any).
	offset atomic.Int64
	// logged is set once LogSummary is called (on the world or a group):
	// the world's Close then leaves the report to it (closeSummary).
	logged atomic.Bool
}

// newProfiler returns the logger cfg describes, or nil when it is off.
func newProfiler(cfg *profile.Config, worldRank int) *profiler {
	if !profileHook || cfg == nil || !cfg.Enabled {
		return nil
	}
	p := &profiler{log: profile.NewLogger(*cfg), cfg: *cfg, worldRank: worldRank}
	if cfg.Verbose && worldRank == 0 {
		p.verbose = cfg.Output
		if p.verbose == nil {
			p.verbose = os.Stderr
		}
	}
	return p
}

// profileConfig picks the logger's configuration: Options.Profile when set,
// else the environment through getenv (nil: none).
func profileConfig(opt *profile.Config, getenv func(string) string) (*profile.Config, error) {
	if opt != nil {
		if err := opt.Validate(); err != nil {
			return nil, fmt.Errorf("%w: Options.Profile: %w", ErrInvalid, err)
		}
		return opt, nil
	}
	if getenv == nil {
		return nil, nil
	}
	cfg, err := profile.FromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnvironment, err)
	}
	return cfg, nil
}

type logNameKey struct{}

type profilingKey struct{}

// WithLogName returns a context under which operations are recorded with
// the record name name instead of their op name: DeepSpeed's log_name.
// Config.Ops matches it as well as the op name. A nil ctx stands for
// context.Background().
//
//	comm.AllReduce(comm.WithLogName(ctx, "grad_allreduce"), c, g, g, comm.Avg)
func WithLogName(ctx context.Context, name string) context.Context {
	if ctx == nil {
		ctx = context.Background() // as context.WithValue cannot take nil
	}
	return context.WithValue(ctx, logNameKey{}, name)
}

// WithProfiling returns a context under which operations are profiled (on)
// or not (off) whatever Config.OpsOnly and Config.Ops say; on is
// DeepSpeed's prof=True. It does not switch a logger on. A nil ctx stands
// for context.Background().
func WithProfiling(ctx context.Context, on bool) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, profilingKey{}, on)
}

// opNames maps kinds to record op names.
var opNames = [...]string{
	core.KindAllReduce: profile.OpAllReduce, core.KindReduce: profile.OpReduce,
	core.KindBroadcast: profile.OpBroadcast, core.KindAllGather: profile.OpAllGather,
	core.KindAllGatherV: profile.OpAllGatherV, core.KindGather: profile.OpGather,
	core.KindGatherV: profile.OpGatherV, core.KindScatter: profile.OpScatter,
	core.KindScatterV: profile.OpScatterV, core.KindReduceScatter: profile.OpReduceScatter,
	core.KindReduceScatterV: profile.OpReduceScatterV, core.KindAllToAll: profile.OpAllToAll,
	core.KindAllToAllV: profile.OpAllToAllV, core.KindBarrier: profile.OpBarrier,
	core.KindMonitoredBarrier: profile.OpMonitoredBarrier, core.KindSend: profile.OpSend,
	core.KindRecv: profile.OpRecv,
}

func opName(k core.Kind) string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return strings.ToLower(k.String())
}

// instrument marks w to be timed when the operation is to be profiled.
// The clock starts now, in the Start call, and stops when the operation
// completes, before w is marked done, so that a record exists once Wait has
// returned; nothing waits or synchronises ranks on the profiler's behalf.
func (p *profiler) instrument(ctx context.Context, req *backend.Request, w *Work) {
	op := opName(req.Kind)
	var name, parent string
	switch v := ctx.Value(logNameKey{}).(type) {
	case string:
		name = v
	case *objectSpan:
		// A piece of an object collective: profiled as it is, under its
		// op name, labelled with it.
		if !v.profiled {
			return
		}
		parent = v.name
	}
	if parent == "" && !p.selected(ctx, op, name) {
		return
	}
	if name == "" {
		name = op
	}
	if p.cfg.Debug {
		name += " | [Caller Func: " + callerName() + "]"
	}
	w.prof, w.profOp, w.profName, w.profParent, w.profStart = p, op, name, parent, time.Now()
}

// selected says whether an operation op, named name by WithLogName ("" if
// not), is to be profiled: as WithProfiling says, else as the
// configuration's selection does.
func (p *profiler) selected(ctx context.Context, op, name string) bool {
	if on, set := ctx.Value(profilingKey{}).(bool); set {
		return on
	}
	return p.log.Selected(op, name)
}

// objectSpan is what the context of an object collective's pieces holds
// under logNameKey (see beginObject): the collective's record name and
// whether it is profiled, which its pieces follow.
type objectSpan struct {
	name     string
	profiled bool
}

// beginObject notes that the object collective op (package object:
// object.Broadcast...) starts on c now, root its root or -1, and returns
// the context its pieces run under and the function that notes its end,
// given its payload bytes on this rank and its error. The flight recorder
// enters it, with the sequence numbers its pieces take on c; the comms
// logger, when on and the collective is selected (by op, or the log name
// ctx carries), records it under its name and its pieces with it as their
// Record.Parent. Nothing of it runs in the pieces themselves.
func (c *Comm) beginObject(ctx context.Context, op string, root int) (context.Context, func(bytes int64, err error)) {
	rec := c.rec
	var ticket flightTicket
	if rec != nil {
		ticket = rec.enterObject(op, root, c.peekSeq())
	}
	p := c.profiler()
	var span *objectSpan
	var start time.Time
	if p != nil && ctx != nil {
		name, _ := ctx.Value(logNameKey{}).(string)
		span = &objectSpan{name: name, profiled: p.selected(ctx, op, name)}
		if span.name == "" {
			span.name = op
		}
		ctx = context.WithValue(ctx, logNameKey{}, span)
		start = time.Now()
	}
	return ctx, func(bytes int64, err error) {
		if rec != nil {
			rec.exitObject(ticket, c.peekSeq()-1, err)
		}
		if span == nil || !span.profiled {
			return
		}
		r := profile.Record{
			Op: op, Name: span.name, Comm: c.id, CommSize: c.size, Rank: c.rank, WorldRank: c.global[c.rank],
			Bytes: bytes, TotalBytes: bytes, Root: root, Peer: -1, Start: start, Latency: time.Since(start),
		}
		if err != nil {
			r.Err = err.Error()
		}
		p.log.Add(r)
		if p.verbose != nil {
			r.AlgBW, r.BusBW = profile.Bandwidth(op, bytes, c.size, r.Latency)
			p.verboseMu.Lock()
			fmt.Fprintln(p.verbose, profile.FormatVerbose(r, p.cfg.Layout))
			p.verboseMu.Unlock()
		}
	}
}

func (p *profiler) record(c *Comm, req *backend.Request, op, name, parent string, start time.Time, lat time.Duration, err error) {
	var all int64
	for _, n := range req.Counts {
		all += int64(n)
	}
	all *= int64(req.DType.Size())
	recv := int64(len(req.Recv))
	if req.UpTo && err == nil {
		recv = int64(req.Received) // RecvUpTo: the message, not the buffer
	}
	s, t := profile.MessageSizes(op, int64(len(req.Send)), recv, all)
	r := profile.Record{
		Op: op, Name: name, Parent: parent, Comm: c.id, CommSize: c.size, Rank: c.rank, WorldRank: c.global[c.rank],
		Seq: req.Seq, Bytes: s, TotalBytes: t, DType: req.DType.String(), Root: -1, Peer: -1,
		Start: start, Latency: lat,
	}
	switch req.Kind {
	case core.KindReduce, core.KindBroadcast, core.KindGather, core.KindGatherV,
		core.KindScatter, core.KindScatterV:
		r.Root = req.Root
	case core.KindSend:
		r.Peer = req.Peer
	case core.KindRecv:
		r.Peer = req.Peer
		if req.Source >= 0 {
			r.Peer = req.Source
		}
	}
	if req.Used != algo.Auto {
		r.Algorithm = req.Used.String()
	}
	if err != nil {
		r.Err = err.Error()
	}
	p.log.Add(r) // it computes the bandwidths when they are read
	if p.verbose != nil {
		r.AlgBW, r.BusBW = profile.Bandwidth(op, t, c.size, lat)
		p.verboseMu.Lock()
		fmt.Fprintln(p.verbose, profile.FormatVerbose(r, p.cfg.Layout))
		p.verboseMu.Unlock()
	}
}

// callerName is the first function on the stack outside package comm:
// the user's function that started the operation (debug mode).
func callerName() string {
	var pcs [32]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		fn := f.Function
		if fn != "" && !strings.HasPrefix(fn, "github.com/gocomm/comm.") && !strings.HasPrefix(fn, "runtime.") {
			return fn[strings.LastIndexByte(fn, '/')+1:]
		}
		if !more {
			return "unknown"
		}
	}
}

// profiler returns c's logger, nil when it is off.
func (c *Comm) profiler() *profiler {
	if !profileHook || c == nil {
		return nil
	}
	return c.prof
}

// Profiler is the comms logger's handle on a communicator (DeepSpeed's
// comms logger): Options.Profile or GOCOMM_PROFILE switch the logger on,
// every operation is then timed as it runs, and these methods read, reset
// and report what was recorded on this rank (of the communicator's world
// and all its groups). Get it with Comm.Profiler; it is a view of the
// communicator, not a copy, and costs nothing to get. A nil or non-member
// communicator's Profiler answers as the communicator would (no records,
// ErrInvalid or nothing to report).
type Profiler Comm

// Profiler returns the handle of c's comms logger. It never allocates: the
// handle is c itself, seen as a *Profiler.
func (c *Comm) Profiler() *Profiler { return (*Profiler)(c) }

func (p *Profiler) comm() *Comm { return (*Comm)(p) }

// Enabled reports whether the comms logger is on (Options.Profile,
// GOCOMM_PROFILE).
func (p *Profiler) Enabled() bool { return p.comm().profiler() != nil }

// Records returns this rank's records, of the world and all its groups, in
// the order the operations completed; nil when the logger is off.
func (p *Profiler) Records() []profile.Record {
	if l := p.comm().profiler(); l != nil {
		return l.log.Records()
	}
	return nil
}

// Reset drops this rank's records (of the world and all its groups), as
// DeepSpeed's reset_log does. Operations still running are recorded when
// they complete.
func (p *Profiler) Reset() {
	if l := p.comm().profiler(); l != nil {
		l.log.Reset()
	}
}

// LogSummary writes, on rank 0 of the communicator, the summary table of
// this rank's records (profile.WriteSummary; DeepSpeed's log_summary) to
// w; other ranks write nothing, and a nil w prints nothing. With
// straggler, it is a collective (every rank of the communicator must call
// it) that adds the straggler analysis (StragglerReport) naming the rank
// that arrived last. When
// Config.TraceDir is set every rank also writes its trace there
// (WriteTraceFile). With the logger off it does nothing; every rank must
// have it on or off alike.
//
// The operations LogSummary runs itself are not recorded, and it adds no
// barrier: call it when the operations to report on are complete. If this
// process never calls it, the world's Close prints rank 0's table to
// Config.Output (stderr) and writes this rank's trace, without the
// straggler analysis.
func (p *Profiler) LogSummary(ctx context.Context, w io.Writer, straggler bool) error {
	c := p.comm()
	if err := c.made("LogSummary"); err != nil {
		return err
	}
	l := c.profiler()
	if ctx == nil {
		if straggler && l != nil && c.be != nil {
			// A collective: the other ranks must not wait for this one.
			return c.failCollective(core.KindGather, errNilContext("LogSummary"))
		}
		return errNilContext("LogSummary")
	}
	if l == nil || c.be == nil {
		return nil
	}
	l.logged.Store(true)
	if w == nil {
		w = io.Discard
	}
	if c.rank == 0 {
		layout := l.cfg.Layout
		if err := profile.WriteSummary(w, profile.Summarize(l.log.Records(), layout), layout); err != nil {
			return err
		}
	}
	if straggler {
		rep, err := p.StragglerReport(ctx)
		if err != nil {
			return err
		}
		if c.rank == 0 {
			if err := profile.WriteStraggler(w, *rep); err != nil {
				return err
			}
		}
	}
	if l.cfg.TraceDir != "" {
		if _, err := p.WriteTraceFile(l.cfg.TraceDir); err != nil {
			return fmt.Errorf("comm: LogSummary: writing the trace: %w", err)
		}
	}
	return nil
}

// closeSummary is the comms logger's part of the world's Close when the
// program never called LogSummary, so that GOCOMM_PROFILE (commrun
// -profile) and GOCOMM_TRACE_DIR work without code changes: rank 0 prints
// its summary table to Config.Output (os.Stderr when nil) and every rank
// writes its trace to Config.TraceDir when set. It runs no collective, so
// that Close never waits for peers that may be gone; the straggler
// analysis, which needs every rank, is LogSummary's alone.
func (c *Comm) closeSummary() error {
	l := c.profiler()
	if l == nil || l.logged.Load() {
		return nil
	}
	if c.rank == 0 {
		w := l.cfg.Output
		if w == nil {
			w = os.Stderr
		}
		b := &strings.Builder{}
		fmt.Fprintf(b, "gocomm comms logger: rank 0's operations, printed at Close (call c.Profiler().LogSummary(ctx, w, true) to choose where, with a straggler analysis)\n")
		layout := l.cfg.Layout
		if err := profile.WriteSummary(b, profile.Summarize(l.log.Records(), layout), layout); err == nil {
			io.WriteString(w, b.String()) // a summary that cannot be printed is no reason to fail Close
		}
	}
	if l.cfg.TraceDir != "" {
		if _, err := c.Profiler().WriteTraceFile(l.cfg.TraceDir); err != nil {
			return fmt.Errorf("comm: Close: writing the comms logger's trace: %w", err)
		}
	}
	return nil
}

// clockSyncTag is the Send/Recv tag of the clock exchange; user messages
// with this tag on the same communicator would be confused with it.
const clockSyncTag = 0x7c10c5

// clockRounds is how many round trips the clock exchange makes per rank.
const clockRounds = 8

// StragglerReport is a collective over the communicator: every rank sends
// its rank 0 when it entered each collective it recorded (matched across
// ranks by communicator and sequence number), and rank 0 returns the analysis
// (profile.AnalyzeArrivals); the other ranks return nil. Ranks whose host
// differs from rank 0's (or all, with ClockSyncAlways) first exchange
// clock readings with it, and their arrivals are corrected by the
// estimated offset. It returns nil, nil when the logger is off.
func (p *Profiler) StragglerReport(ctx context.Context) (*profile.StragglerReport, error) {
	c := p.comm()
	if err := c.made("StragglerReport"); err != nil {
		return nil, err
	}
	l := c.profiler()
	if ctx == nil {
		if l != nil && c.be != nil {
			return nil, c.failCollective(core.KindGather, errNilContext("StragglerReport"))
		}
		return nil, errNilContext("StragglerReport")
	}
	if l == nil {
		return nil, nil
	}
	if c.be == nil {
		return nil, fmt.Errorf("%w: StragglerReport", ErrNotMember)
	}
	ctx = WithProfiling(ctx, false)
	host, _ := os.Hostname()
	offsets, err := c.syncClocks(ctx, l, host)
	if err != nil {
		return nil, fmt.Errorf("comm: straggler analysis: clock exchange: %w", err)
	}
	mine := profile.RankArrivals{Rank: c.global[c.rank], Host: host, Arrivals: profile.ArrivalsOf(l.log.Records())}
	all, err := gatherGob(ctx, c, mine, 0, false)
	if err != nil {
		return nil, fmt.Errorf("comm: straggler analysis: gathering arrivals: %w", err)
	}
	if c.rank != 0 {
		return nil, nil
	}
	var used []profile.ClockOffset
	for r := range all {
		if o, ok := offsets[r]; ok {
			all[r].Offset = o.Offset
			used = append(used, profile.ClockOffset{Rank: c.global[r], Offset: o.Offset, Uncertainty: o.Uncertainty})
		}
	}
	rep := profile.AnalyzeArrivals(all)
	rep.Offsets = used
	return &rep, nil
}

// syncClocks estimates, on rank 0 of c, the clock offset of every rank that
// needs it (keyed by rank of c) and tells each its own.
func (c *Comm) syncClocks(ctx context.Context, p *profiler, host string) (map[int]profile.ClockOffset, error) {
	if c.size < 2 || p.cfg.ClockSync == profile.ClockSyncOff {
		return nil, nil
	}
	need := make([]bool, c.size)
	if p.cfg.ClockSync == profile.ClockSyncAlways {
		for r := 1; r < c.size; r++ {
			need[r] = true
		}
	} else {
		hosts, err := gatherGob(ctx, c, host, 0, true)
		if err != nil {
			return nil, err
		}
		for r := 1; r < c.size; r++ {
			need[r] = hosts[r] != hosts[0]
		}
	}
	offsets := map[int]profile.ClockOffset{}
	for r := 1; r < c.size; r++ {
		if !need[r] {
			continue
		}
		switch c.rank {
		case 0:
			samples := make([]profile.PingSample, 0, clockRounds)
			reply := make([]int64, 2)
			for range clockRounds {
				t0 := time.Now().UnixNano()
				if err := Send(ctx, c, []int64{t0}, r, clockSyncTag); err != nil {
					return nil, err
				}
				if _, err := Recv(ctx, c, reply, r, clockSyncTag); err != nil {
					return nil, err
				}
				samples = append(samples, profile.PingSample{T0: t0, T1: reply[0], T2: reply[1], T3: time.Now().UnixNano()})
			}
			off, unc, _ := profile.EstimateOffset(samples)
			offsets[r] = profile.ClockOffset{Rank: r, Offset: off, Uncertainty: unc}
			if err := Send(ctx, c, []int64{int64(off)}, r, clockSyncTag); err != nil {
				return nil, err
			}
		case r:
			in := make([]int64, 1)
			for range clockRounds {
				if _, err := Recv(ctx, c, in, 0, clockSyncTag); err != nil {
					return nil, err
				}
				t1 := time.Now().UnixNano()
				if err := Send(ctx, c, []int64{t1, time.Now().UnixNano()}, 0, clockSyncTag); err != nil {
					return nil, err
				}
			}
			if _, err := Recv(ctx, c, in, 0, clockSyncTag); err != nil {
				return nil, err
			}
			p.offset.Store(in[0])
		}
	}
	return offsets, nil
}

// WriteJSON writes this rank's records and their summary as JSON
// (profile.Report). With the logger off it writes a report with no
// records.
func (p *Profiler) WriteJSON(w io.Writer) error {
	c := p.comm()
	if err := c.made("WriteJSON"); err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("%w: WriteJSON: nil io.Writer", ErrInvalid)
	}
	layout := profile.LayoutGBs
	if l := c.profiler(); l != nil {
		layout = l.cfg.Layout
	}
	return profile.WriteJSON(w, profile.NewReport(c.rank, c.worldRank(), p.Records(), layout))
}

// WriteTrace writes this rank's records as a Chrome/Perfetto trace
// (profile.WriteTrace), its times corrected by the clock offset the last
// straggler analysis estimated, if any.
func (p *Profiler) WriteTrace(w io.Writer) error {
	c := p.comm()
	if err := c.made("WriteTrace"); err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("%w: WriteTrace: nil io.Writer", ErrInvalid)
	}
	return profile.WriteTrace(w, c.worldRank(), p.Records(), c.clockOffset())
}

// WriteTraceFile writes this rank's trace to dir (created if needed) as
// profile.TraceFileName(world rank) and returns its path. Merge the ranks'
// files with profile.MergeTraceDir or the commtrace command.
func (p *Profiler) WriteTraceFile(dir string) (string, error) {
	c := p.comm()
	if err := c.made("WriteTraceFile"); err != nil {
		return "", err
	}
	path, err := profile.WriteTraceFile(dir, c.worldRank(), p.Records(), c.clockOffset())
	if err != nil {
		return "", fmt.Errorf("comm: WriteTraceFile: %w", err)
	}
	return path, nil
}

func (c *Comm) worldRank() int {
	if c.rank < 0 {
		return -1
	}
	return c.global[c.rank]
}

func (c *Comm) clockOffset() time.Duration {
	if p := c.profiler(); p != nil {
		return time.Duration(p.offset.Load())
	}
	return 0
}
