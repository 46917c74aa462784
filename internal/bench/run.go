package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/onebit"
)

// sendRecvTag is the tag of commbench's point-to-point messages.
const sendRecvTag = 7

// Hooks let rank 0 follow a run: Start is called before each case and
// Done after it, with the case's index in the plan. Either may be nil.
type Hooks struct {
	Start func(i int, cs Case)
	Done  func(i int, s Sample)
}

// Run runs plan on c: every rank of c must call it with the same plan.
// Rank 0 gets one sample per case; the other ranks get nil. hooks, when
// not nil, are called on rank 0 only.
//
// Each case: fill the inputs, barrier, warm-ups, then the timed
// iterations back to back, each timed on its own; the durations are then
// combined across ranks (the slowest rank's per iteration). With
// plan.Check, the case then runs once more on fresh inputs and every
// element of every rank's result is verified.
func Run(ctx context.Context, c *comm.Comm, plan Plan, hooks *Hooks) ([]Sample, error) {
	if hooks == nil || c.Rank() != 0 {
		hooks = &Hooks{}
	}
	switch plan.DType {
	case core.Int8:
		return run[int8](ctx, c, plan, hooks)
	case core.Int16:
		return run[int16](ctx, c, plan, hooks)
	case core.Int32:
		return run[int32](ctx, c, plan, hooks)
	case core.Int64:
		return run[int64](ctx, c, plan, hooks)
	case core.Uint8:
		return run[uint8](ctx, c, plan, hooks)
	case core.Uint16:
		return run[uint16](ctx, c, plan, hooks)
	case core.Uint32:
		return run[uint32](ctx, c, plan, hooks)
	case core.Uint64:
		return run[uint64](ctx, c, plan, hooks)
	case core.Float16:
		return run[comm.Float16](ctx, c, plan, hooks)
	case core.BFloat16:
		return run[comm.BFloat16](ctx, c, plan, hooks)
	case core.Float32:
		return run[float32](ctx, c, plan, hooks)
	case core.Float64:
		return run[float64](ctx, c, plan, hooks)
	}
	return nil, fmt.Errorf("commbench: element type %v cannot be benchmarked", plan.DType)
}

func run[T comm.Numeric](ctx context.Context, c *comm.Comm, plan Plan, hooks *Hooks) ([]Sample, error) {
	n, me := c.Size(), c.Rank()
	es := plan.DType.Size()
	maxCount := int(plan.MaxBytes() / int64(es))
	var send, recv []T
	if !plan.Shared {
		send, recv = make([]T, maxCount), make([]T, maxCount)
	} else {
		var err error
		if send, err = comm.AllocShared[T](ctx, c, maxCount); err != nil {
			return nil, fmt.Errorf("commbench: --shared-buffers: %w", err)
		}
		defer comm.FreeShared(c, send)
		if recv, err = comm.AllocShared[T](ctx, c, maxCount); err != nil {
			return nil, fmt.Errorf("commbench: --shared-buffers: %w", err)
		}
		defer comm.FreeShared(c, recv)
	}
	maxIters := 0
	for _, cs := range plan.Cases {
		maxIters = max(maxIters, cs.Iters)
	}
	times := make([]float64, maxIters)
	// Write every page of times now: fresh memory faults on its first
	// write, and on a virtual machine whose host supplies memory lazily a
	// fault costs tens of microseconds, which the first case's timed loop
	// would otherwise take once per 512 iterations.
	clear(times)
	chk := newChecker[T](plan.DType, plan.RedOp, me, n)
	var samples []Sample
	for i, cs := range plan.Cases {
		if hooks.Start != nil {
			hooks.Start(i, cs)
		}
		l, ok := LayoutOf(cs.Op, cs.Bytes, es, n)
		if !ok {
			return nil, fmt.Errorf("commbench: case %d: %v of %d bytes does not fit %d ranks of %v", i, cs.Op, cs.Bytes, n, plan.DType)
		}
		b := bufs[T]{send: send[:l.Send], recv: recv[:l.Recv], l: l}
		if plan.InPlace && cs.Op == AllReduce {
			b.recv = b.send
		}
		once := opFunc(ctx, c, cs, plan.RedOp, b)
		fail := func(what string, err error) ([]Sample, error) {
			return nil, fmt.Errorf("commbench: %v of %d bytes, %s: %w", cs.Op, cs.Bytes, what, err)
		}
		chk.prepare(cs, b)
		if err := comm.Barrier(ctx, c); err != nil {
			return fail("barrier", err)
		}
		for w := 0; w < cs.Warmup; w++ {
			if err := once(); err != nil {
				return fail("warm-up", err)
			}
		}
		// One clock read per iteration: each iteration ends where the next
		// begins. time.Since reads only the monotonic clock (time.Now reads
		// the wall clock too), and every harness times its loop the same
		// way (internal/bench/peers), so that an 8-byte operation's figure is the
		// library's, not the clock's (three reads per iteration were a
		// visible part of a small shared-memory all-reduce).
		ts := times[:cs.Iters]
		l0 := time.Now()
		var prev time.Duration
		for it := range ts {
			if err := once(); err != nil {
				return fail("timed iteration", err)
			}
			now := time.Since(l0)
			ts[it] = (now - prev).Seconds()
			prev = now
		}
		loop := []float64{prev.Seconds() / float64(len(ts))}
		if err := comm.AllReduce(ctx, c, ts, ts, comm.Max); err != nil {
			return fail("combining times", err)
		}
		if err := comm.AllReduce(ctx, c, loop, loop, comm.Max); err != nil {
			return fail("combining loop times", err)
		}
		wrong := []int64{-1}
		if plan.Check {
			chk.prepare(cs, b)
			if err := once(); err != nil {
				return fail("check run", err)
			}
			if cs.Op == OneBit {
				n, err := countDisagreeing(ctx, c, b.recv)
				if err != nil {
					return fail("check run", err)
				}
				wrong[0] = n
			} else {
				wrong[0] = chk.count(cs, b)
			}
			if err := comm.AllReduce(ctx, c, wrong, wrong, comm.Sum); err != nil {
				return fail("combining check counts", err)
			}
		}
		if me == 0 {
			s := Sample{Case: cs, Times: append([]float64(nil), ts...), Loop: loop[0], Wrong: wrong[0]}
			samples = append(samples, s)
			if hooks.Done != nil {
				hooks.Done(i, s)
			}
		}
	}
	return samples, nil
}

// countDisagreeing counts the elements of out that are not the same on
// every rank (onebit's check: its result is lossy by design, but every
// rank must get the same one).
func countDisagreeing[T comm.Numeric](ctx context.Context, c *comm.Comm, out []T) (int64, error) {
	hi, lo := append([]T(nil), out...), append([]T(nil), out...)
	if err := comm.AllReduce(ctx, c, hi, hi, comm.Max); err != nil {
		return 0, err
	}
	if err := comm.AllReduce(ctx, c, lo, lo, comm.Min); err != nil {
		return 0, err
	}
	var w int64
	for i := range hi {
		if hi[i] != lo[i] {
			w++
		}
	}
	return w, nil
}

// bufs are one case's buffers on one rank.
type bufs[T comm.Numeric] struct {
	send, recv []T
	l          Layout
}

// opFunc returns one call of the case's op on this rank.
func opFunc[T comm.Numeric](ctx context.Context, c *comm.Comm, cs Case, redop comm.ReduceOp, b bufs[T]) func() error {
	n, me := c.Size(), c.Rank()
	switch cs.Op {
	case AllReduce:
		return func() error { return comm.AllReduce(ctx, c, b.send, b.recv, redop) }
	case Reduce:
		return func() error { return comm.Reduce(ctx, c, b.send, b.recv, redop, cs.Root) }
	case Broadcast:
		return func() error { return comm.Broadcast(ctx, c, b.recv, cs.Root) }
	case AllGather:
		return func() error { return comm.AllGather(ctx, c, b.send, b.recv) }
	case ReduceScatter:
		return func() error { return comm.ReduceScatter(ctx, c, b.send, b.recv, redop) }
	case AllToAll:
		return func() error { return comm.AllToAll(ctx, c, b.send, b.recv) }
	case SendRecv:
		next, prev := (me+1)%n, (me+n-1)%n
		return func() error {
			w := comm.StartRecv(ctx, c, b.recv, prev, sendRecvTag)
			err := comm.Send(ctx, c, b.send, next, sendRecvTag)
			if werr := w.Wait(); err == nil {
				err = werr
			}
			return err
		}
	case PingPong:
		switch me {
		case 0:
			return func() error {
				if err := comm.Send(ctx, c, b.send, 1, sendRecvTag); err != nil {
					return err
				}
				_, err := comm.Recv(ctx, c, b.recv, 1, sendRecvTag)
				return err
			}
		case 1:
			return func() error {
				if _, err := comm.Recv(ctx, c, b.recv, 0, sendRecvTag); err != nil {
					return err
				}
				return comm.Send(ctx, c, b.send, 0, sendRecvTag)
			}
		}
		return func() error { return nil }
	case Barrier:
		return func() error { return comm.Barrier(ctx, c) }
	case OneBit:
		// In place on recv, with one error-feedback state per case, as a
		// training loop keeps one per tensor; BuildPlan admits float32 only.
		buf, ok := any(b.recv).([]float32)
		if !ok {
			return func() error { return fmt.Errorf("commbench: onebit needs float32, not %T", b.recv) }
		}
		st := onebit.NewState(len(buf), n)
		return func() error { return onebit.AllReduce(ctx, c, buf, st) }
	}
	return func() error { return fmt.Errorf("commbench: unknown op %v", cs.Op) }
}

// prepare fills this rank's inputs with the check pattern and clears its
// outputs.
func (k checker[T]) prepare(cs Case, b bufs[T]) {
	switch cs.Op {
	case Broadcast:
		if k.rank == cs.Root {
			k.fill(b.recv, k.rank, 0)
		} else {
			k.zero(b.recv)
		}
	case Barrier:
	case OneBit:
		k.fill(b.recv, k.rank, 0)
	default:
		k.fill(b.send, k.rank, 0)
		if len(b.recv) > 0 && (len(b.send) == 0 || &b.recv[0] != &b.send[0]) {
			k.zero(b.recv) // not in place
		}
	}
}

// count counts this rank's wrong output elements after one run of cs on
// prepared buffers.
func (k checker[T]) count(cs Case, b bufs[T]) int64 {
	n, me, blk := k.ranks, k.rank, b.l.Block
	switch cs.Op {
	case AllReduce:
		return k.countReduced(b.recv, 0)
	case Reduce:
		if me == cs.Root {
			return k.countReduced(b.recv, 0)
		}
	case Broadcast:
		return k.countFrom(b.recv, cs.Root, 0)
	case AllGather:
		var w int64
		for p := 0; p < n; p++ {
			w += k.countFrom(b.recv[p*blk:(p+1)*blk], p, 0)
		}
		return w
	case ReduceScatter:
		return k.countReduced(b.recv, me*blk)
	case AllToAll:
		var w int64
		for p := 0; p < n; p++ {
			w += k.countFrom(b.recv[p*blk:(p+1)*blk], p, me*blk)
		}
		return w
	case SendRecv:
		return k.countFrom(b.recv, (me+n-1)%n, 0)
	case PingPong:
		switch me {
		case 0:
			return k.countFrom(b.recv, 1, 0)
		case 1:
			return k.countFrom(b.recv, 0, 0)
		}
	}
	return 0
}
