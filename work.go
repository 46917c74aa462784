package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// AnySource as the source of Recv receives from whichever rank sends first.
const AnySource = -1

// Work is the handle of an operation started asynchronously. The buffers
// passed to the Start call belong to the operation until it is done: do not
// read or write them before Wait returns (or Done is closed).
type Work struct {
	done   chan struct{}
	err    error
	req    *backend.Request
	source int
	// count is the number of elements a Recv received; read only when
	// source >= 0 (a Recv that succeeded).
	count int
	// post, if set, runs once the operation has succeeded and before it
	// is done: the coalesced collectives unpack their results with it.
	post func()

	// Until the Work is started, by async (in a new goroutine) or sync (on
	// the caller's goroutine), pending is set and c and ctx say where and
	// how to perform req.
	pending bool
	c       *Comm
	ctx     context.Context
	// pooled: the Work and its request came from the pools below and go
	// back when a sync call has finished with them. A Work handed to the
	// caller by a Start function never returns to a pool.
	pooled bool
	// The comms logger's timing of this operation (profiler.go); prof is
	// nil when it is not profiled.
	prof       *profiler
	profOp     string
	profName   string
	profParent string // the object collective it is a piece of, if any
	profStart  time.Time
}

// The blocking forms of every operation are their Start forms run in
// place; recycling the Work and the request keeps a loop of small
// collectives free of allocations (and of the garbage collections that
// would stall every rank waiting for this one).
var (
	works    = sync.Pool{New: func() any { return new(Work) }}
	requests = sync.Pool{New: func() any { return new(backend.Request) }}
)

// async starts the operation in its own goroutine.
func (w *Work) async() *Work {
	w.pooled = false
	if w.pending {
		w.pending = false
		w.done = make(chan struct{})
		go func() {
			defer close(w.done)
			w.execute()
		}()
	}
	return w
}

// sync performs the operation on the calling goroutine and returns its
// error: the blocking forms are the Start forms, run in place.
func (w *Work) sync() error {
	_, err := w.syncSource()
	return err
}

// syncSource is sync that also returns Source; w must not be used after.
func (w *Work) syncSource() (int, error) {
	source, _, err := w.syncRecv()
	return source, err
}

// syncRecv is sync that also returns Source and Count; w must not be used
// after.
func (w *Work) syncRecv() (source, count int, err error) {
	if w.pending {
		w.pending = false
		w.execute()
	}
	source, count, err = w.source, w.count, w.err
	if source < 0 {
		count = -1
	}
	if w.pooled {
		*w.req = backend.Request{}
		requests.Put(w.req)
		*w = Work{}
		works.Put(w)
	}
	return source, count, err
}

// execute performs the operation and records it when it is profiled. It
// is the one place every operation enters and leaves: the flight recorder
// (flightrec.go) notes both, and a failure is explained there
// (flightexchange.go).
func (w *Work) execute() {
	rec := w.c.rec
	var ticket flightTicket
	if rec != nil {
		ticket = rec.enter(w.req)
	}
	w.c.perform(w.ctx, w.req, w)
	if rec != nil {
		rec.exit(ticket, w.err)
		if w.err != nil {
			w.err = w.c.explainFailure(w.req, w.err)
		}
	}
	if w.post != nil && w.err == nil {
		w.post()
	}
	if profileHook && w.prof != nil {
		w.prof.record(w.c, w.req, w.profOp, w.profName, w.profParent, w.profStart, time.Since(w.profStart), w.err)
	}
	w.ctx = nil
}

// Wait blocks until the operation is complete and returns its error. A nil
// *Work, or a zero Work not made by a Start function, is done at once
// with an error wrapping ErrInvalid.
func (w *Work) Wait() error {
	if err := w.unmade(); err != nil {
		return err
	}
	<-w.done
	return w.err
}

// Done is closed when the operation is complete (at once for a nil or a
// zero Work: see Wait).
func (w *Work) Done() <-chan struct{} {
	if w.unmade() != nil {
		return closedChan
	}
	return w.done
}

// Err is the operation's error once Done is closed (nil before).
func (w *Work) Err() error {
	if err := w.unmade(); err != nil {
		return err
	}
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// Source is the sender of a completed Recv (useful with AnySource); -1 for
// other operations or before completion.
func (w *Work) Source() int {
	if w.unmade() != nil {
		return -1
	}
	select {
	case <-w.done:
		return w.source
	default:
		return -1
	}
}

// Count is the number of elements a completed Recv received (with
// RecvUpTo, at most the buffer's length); -1 for other operations, a
// failed Recv, or before completion.
func (w *Work) Count() int {
	if w.unmade() != nil {
		return -1
	}
	select {
	case <-w.done:
		if w.source >= 0 {
			return w.count
		}
	default:
	}
	return -1
}

// closedChan is Done's answer for a Work that no Start function made.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// unmade says why w is not a handle a Start function returned (nil, or a
// zero Work, whose Wait would otherwise block for ever), else nil.
func (w *Work) unmade() error {
	switch {
	case w == nil:
		return fmt.Errorf("%w: a nil *Work: wait on what a Start function returned", ErrInvalid)
	case w.done == nil:
		return fmt.Errorf("%w: a zero Work: only Start functions make Works", ErrInvalid)
	}
	return nil
}

// failed returns a completed Work carrying err; async and sync only report
// it.
func failed(err error) *Work {
	w := &Work{done: make(chan struct{}), err: err, source: -1}
	close(w.done)
	return w
}

// invalid wraps a validation failure.
func invalid(kind core.Kind, format string, args ...any) error {
	return fmt.Errorf("%w: %v: %s", ErrInvalid, kind, fmt.Sprintf(format, args...))
}

// startCollective assigns the next sequence number to req and runs it in the
// background. A validation error (verr) still consumes the sequence number
// and aborts the world, so that the other ranks, which may have passed their
// own validation, fail at once with this rank's reason instead of waiting
// for it.
func (c *Comm) startCollective(ctx context.Context, req *backend.Request, verr error) *Work {
	if err := c.usable(req.Kind.String()); err != nil {
		return failed(err)
	}
	seq, err := c.nextSeq()
	if err != nil {
		return failed(&OpError{Op: req.Kind, Rank: c.rank, Peer: -1, Err: err})
	}
	req.Seq = seq
	if verr == nil && ctx == nil {
		verr = errNilContext(req.Kind.String())
	}
	if verr != nil {
		err := &OpError{Op: req.Kind, Rank: c.rank, Peer: -1, Seq: seq, Err: verr}
		c.be.Abort(err)
		return failed(err)
	}
	return c.launch(ctx, req)
}

// startP2P runs a point-to-point request; a validation error is only local.
func (c *Comm) startP2P(ctx context.Context, req *backend.Request, verr error) *Work {
	if err := c.usable(req.Kind.String()); err != nil {
		return failed(err)
	}
	if verr == nil && ctx == nil {
		verr = errNilContext(req.Kind.String())
	}
	if verr != nil {
		return failed(&OpError{Op: req.Kind, Rank: c.rank, Peer: req.Peer, Err: verr})
	}
	if c.closed.Load() {
		return failed(&OpError{Op: req.Kind, Rank: c.rank, Peer: req.Peer, Err: ErrClosed})
	}
	return c.launch(ctx, req)
}

// usable says why no operation can run on c, before anything reads its
// rank or size: c is nil, a zero Comm, or a group this rank is not a
// member of (whose rank is -1 and size may be 0). op names the operation.
func (c *Comm) usable(op string) error {
	switch {
	case c == nil:
		return fmt.Errorf("%w: %s on a nil *Comm: pass a communicator from Init, NewLocalWorld, NewGroup, Split or Shrink", ErrInvalid, op)
	case c.be == nil && c.world == nil:
		return fmt.Errorf("%w: %s on a zero Comm: communicators come from Init, NewLocalWorld, NewGroup, Split or Shrink", ErrInvalid, op)
	case c.be == nil:
		return fmt.Errorf("%w: %s on a group that does not contain this rank", ErrNotMember, op)
	}
	return nil
}

// made is usable for the calls that a group this rank is not a member of
// answers too: it refuses only a nil or a zero Comm.
func (c *Comm) made(op string) error {
	if err := c.usable(op); err != nil && !errors.Is(err, ErrNotMember) {
		return err
	}
	return nil
}

// unusable is usable as the failed Work of a Start function, or nil.
func (c *Comm) unusable(kind core.Kind) *Work {
	if err := c.usable(kind.String()); err != nil {
		return failed(err)
	}
	return nil
}

// failCollective fails a collective built of several (object collectives,
// the straggler report) before it starts, as a collective with a bad
// argument fails: the error consumes a sequence number and aborts the
// world, so that the other ranks fail at once with this rank's reason
// instead of waiting for it. c must be usable.
func (c *Comm) failCollective(kind core.Kind, err error) error {
	return c.startCollective(context.Background(), c.request(kind, core.Byte, Sum, 0, nil, nil), err).sync()
}

// errNilContext is the error of a call of op given a nil context.
func errNilContext(op string) error {
	return fmt.Errorf("%w: %s: nil context: pass context.Background() or one with a deadline", ErrInvalid, op)
}

func (c *Comm) launch(ctx context.Context, req *backend.Request) *Work {
	w := works.Get().(*Work)
	*w = Work{req: req, source: -1, pending: true, c: c, ctx: ctx, pooled: true}
	// The comms logger (profiler.go): one branch when it is off.
	if p := c.prof; profileHook && p != nil {
		p.instrument(ctx, req, w)
	}
	return w
}

// run runs req on the backend, bounded by the communicator's timeout
// unless ctx has a deadline.
func (c *Comm) run(ctx context.Context, req *backend.Request) error {
	if _, ok := ctx.Deadline(); !ok {
		o := c.opCtxs.Get(ctx, c.timeout)
		defer o.Release()
		ctx = o
	}
	return c.be.Run(ctx, req)
}

// perform runs req for w; the caller closes w.done.
func (c *Comm) perform(ctx context.Context, req *backend.Request, w *Work) {
	w.err = c.run(ctx, req)
	if req.Kind == core.KindRecv && w.err == nil {
		w.source = req.Source
		w.count = req.Received / max(req.DType.Size(), 1)
	}
}
