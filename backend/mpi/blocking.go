//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/clock"
)

// Blocking and nonblocking MPI calls. Open MPI's blocking collectives
// (coll/tuned) are 2x faster than its nonblocking ones (coll/libnbc) on
// small messages, and much faster still than a nonblocking call polled
// from Go across cgo; on very large ones the nonblocking all-reduce
// dodges the blocking one's default-algorithm collapse at tens of MiB. So
// each collective is run one way or the other by its kind and
// size. MPI does not match a blocking collective with a nonblocking one,
// so the choice must be the same on every rank: it depends only on the
// kind and on a byte count every rank knows (blockingBytes), and on
// GOCOMM_MPI_BLOCKING_MAX, which must be the same on every rank
// (mpirun -x GOCOMM_MPI_BLOCKING_MAX=...).

// noBlocking is a limit no size is under.
const noBlocking = -1

// blockingPolicy is, indexed by kind, the largest size in bytes of each
// collective that uses the blocking MPI function (noBlocking: none).
type blockingPolicy [32]int64

// defaultBlocking is the default table: 16 MiB for all-reduce, 1 MiB for
// broadcasts, 4 MiB for the rest; all-to-all-v never blocks (its size is
// not known to every rank). Blocking wins below these sizes on Open MPI
// 4.1 (vader); its blocking all-reduce collapses between 16 and 32 MiB,
// where the nonblocking one is the faster. The figures behind it, and
// bench/compare-mpi.sh to remeasure, are in docs/performance.md.
func defaultBlocking() blockingPolicy {
	var p blockingPolicy
	for k := range p {
		p[k] = 4 << 20
	}
	p[core.KindAllReduce] = 16 << 20
	p[core.KindBroadcast] = 1 << 20
	return p.fixed()
}

// fixed applies the limits no setting can change: only collectives run
// by gc_coll may block, and all-to-all-v never does.
func (p blockingPolicy) fixed() blockingPolicy {
	for k := range p {
		if !isCollective(core.Kind(k)) || core.Kind(k) == core.KindAllToAllV {
			p[k] = noBlocking
		}
	}
	return p
}

// parseBlocking reads a GOCOMM_MPI_BLOCKING_MAX value ("" is the default
// table).
func parseBlocking(v string) (blockingPolicy, error) {
	p := defaultBlocking()
	v = strings.TrimSpace(v)
	if v == "" {
		return p, nil
	}
	bad := func(format string, args ...any) (blockingPolicy, error) {
		return p, fmt.Errorf("comm: mpi backend: %s=%q: %s (want a size such as 64K or 1M, none, or kind=size entries such as allreduce=16M,broadcast=none,*=1M; the same value on every rank)",
			EnvBlockingMax, v, fmt.Sprintf(format, args...))
	}
	if !strings.Contains(v, "=") {
		n, err := parseLimit(v)
		if err != nil {
			return bad("%v", err)
		}
		for k := range p {
			p[k] = n
		}
		return p.fixed(), nil
	}
	var rest int64
	restSet := false
	named := map[core.Kind]int64{}
	for _, e := range strings.Split(v, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(e), "=")
		if !ok {
			return bad("entry %q has no '='", e)
		}
		n, err := parseLimit(size)
		if err != nil {
			return bad("entry %q: %v", e, err)
		}
		name = strings.TrimSpace(name)
		if name == "*" {
			rest, restSet = n, true
			continue
		}
		k, ok := kindNamed(name)
		if !ok {
			return bad("unknown collective %q", name)
		}
		named[k] = n
	}
	for k := range p {
		if n, ok := named[core.Kind(k)]; ok {
			p[k] = n
		} else if restSet {
			p[k] = rest
		}
	}
	return p.fixed(), nil
}

// kindNamed finds the collective called name (any case, as
// backend.Kind.String spells it: AllReduce, reducescatterv, ...).
func kindNamed(name string) (core.Kind, bool) {
	for k := core.KindAllReduce; k <= core.KindBarrier; k++ {
		if isCollective(k) && strings.EqualFold(k.String(), name) {
			return k, true
		}
	}
	return 0, false
}

// parseLimit parses a byte size with an optional K, M or G suffix (powers
// of 1024, an optional "iB" or "B" after it), or "none".
func parseLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "none") {
		return noBlocking, nil
	}
	u := strings.ToUpper(s)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B")
	shift := 0
	switch {
	case strings.HasSuffix(u, "K"):
		shift = 10
	case strings.HasSuffix(u, "M"):
		shift = 20
	case strings.HasSuffix(u, "G"):
		shift = 30
	}
	if shift > 0 {
		u = u[:len(u)-1]
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n << shift, nil
}

// blockingBytes is the size of req every rank of the communicator agrees
// on, and whether there is one: the reduced or broadcast buffer, the
// gathered or scattered total, nothing for a barrier; all-to-all-v has
// none (each rank knows only its own counts).
func blockingBytes(req *backend.Request) (int64, bool) {
	es := int64(req.DType.Size())
	total := func() int64 {
		var n int64
		for _, x := range req.Counts {
			n += int64(x)
		}
		return n * es
	}
	switch req.Kind {
	case core.KindAllReduce, core.KindBroadcast:
		return int64(len(req.Recv)), true
	case core.KindReduce:
		return int64(len(req.Send)), true
	case core.KindAllGather, core.KindAllGatherV, core.KindGather, core.KindGatherV,
		core.KindScatter, core.KindScatterV, core.KindReduceScatter, core.KindReduceScatterV,
		core.KindAllToAll:
		return total(), true
	case core.KindBarrier:
		return 0, true
	}
	return 0, false
}

// blocking reports whether req runs as one blocking MPI call. Funnelled
// worlds never block (a blocked MPI thread would stop every other
// operation), nor do requests without a sequence number (the one-at-a-
// time order of a communicator's blocking calls rests on it).
func (c *Comm) blocking(req *backend.Request) bool {
	if c.w.funneled || req.Seq == 0 || int(req.Kind) >= len(c.w.blocking) {
		return false
	}
	limit := c.w.blocking[req.Kind]
	if limit < 0 {
		return false
	}
	n, ok := blockingBytes(req)
	return ok && n <= limit
}

// runBlocking performs k with the blocking MPI function, in one cgo call,
// its turn taken: the next collective of the communicator starts only
// once this one has returned. MPI cannot interrupt it: ctx is looked at
// before, and while MPI runs the world's watchdog enforces it as well as
// MPI allows (watch).
func (c *Comm) runBlocking(ctx context.Context, req *backend.Request, k *call) error {
	now := clock.Nanos()
	err := ctx.Err()
	if err == nil {
		err = c.checkStartAt(now)
	}
	if err != nil {
		c.advance(req.Seq)
		k.release()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return c.fail(req, -1, err, "before "+k.a.blockingFn)
		}
		return c.opErr(req, -1, err)
	}
	c.pace.keepScheduledAt(now)
	c.blk.enter(ctx, req, k.a.blockingFn)
	rc := c.gcColl(k, true)
	stuck := c.blk.leave()
	c.advance(req.Seq)
	k.release()
	if stuck != nil {
		return c.fail(req, -1, stuck, "in "+k.a.blockingFn)
	}
	if err := mpiError(k.a.blockingFn, rc); err != nil {
		return c.fail(req, -1, err, "")
	}
	return c.finishAvg(req, k)
}

// blockedCall is the blocking MPI call a communicator is in, for the
// watchdog. One at a time: blocking calls take their turn until they
// return.
type blockedCall struct {
	mu      sync.Mutex // protects the fields below
	ctx     context.Context
	req     *backend.Request
	fn      string
	stuck   error     // why the watchdog gave the call up
	stuckAt time.Time // when
}

func (b *blockedCall) enter(ctx context.Context, req *backend.Request, fn string) {
	b.mu.Lock()
	b.ctx, b.req, b.fn = ctx, req, fn
	b.mu.Unlock()
}

// leave ends the call and returns why the watchdog gave it up, if it did.
func (b *blockedCall) leave() error {
	b.mu.Lock()
	stuck := b.stuck
	b.ctx, b.req, b.stuck = nil, nil, nil
	b.mu.Unlock()
	return stuck
}

// The watchdog looks at the blocking calls every watchEvery. A call whose
// ctx has ended, or whose world has failed (Abort here or on a peer, a
// timeout elsewhere, Close), is given up: the world is aborted as by
// Abort, so that the other ranks' waits end and this rank's other
// operations fail, and the call returns that error when MPI lets it
// return. If MPI has not let it return stuckGrace later (a peer will never
// join it), the watchdog ends the job with MPI_Abort, as a C program's
// only way out of a blocking MPI call, rather than leave the rank hanging.
const (
	watchEvery = 20 * time.Millisecond
	stuckGrace = 10 * time.Second
)

// watch is the world's watchdog; it returns when stop is closed.
func (w *world) watch(stop <-chan struct{}) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	var comms []*Comm
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.mu.Lock()
			comms = append(comms[:0], w.comms...)
			w.mu.Unlock()
			for _, c := range comms {
				c.watchBlocked(now)
			}
		}
	}
}

// watchBlocked is the watchdog's look at c's blocking call.
func (c *Comm) watchBlocked(now time.Time) {
	b := &c.blk
	b.mu.Lock()
	if b.ctx == nil {
		b.mu.Unlock()
		return
	}
	if b.stuck != nil {
		if now.Sub(b.stuckAt) >= stuckGrace {
			msg := fmt.Sprintf("comm: mpi backend: rank %d: %v (sequence %d) is still inside %s %v after it was given up (%v); a blocking MPI call cannot be interrupted and a peer will not join it: ending the job with MPI_Abort. Set %s=none on every rank to run collectives nonblocking, so that a context can end them.",
				c.rank, b.req.Kind, b.req.Seq, b.fn, stuckGrace, b.stuck, EnvBlockingMax)
			b.mu.Unlock()
			c.w.log.Error(msg)
			fmt.Fprintln(os.Stderr, msg)
			C.gc_abort(3)
			return
		}
		b.mu.Unlock()
		return
	}
	c.w.pollAbort()
	var why error
	if err := b.ctx.Err(); err != nil {
		why = err
	} else if d, ok := b.ctx.Deadline(); ok && !now.Before(d) {
		why = context.DeadlineExceeded
	} else if err := c.w.failure(); err != nil {
		why = err
	} else if c.gate.closedFlag.Load() {
		why = core.ErrClosed
	}
	if why == nil {
		b.mu.Unlock()
		return
	}
	b.stuck, b.stuckAt = why, now
	kind, seq, fn := b.req.Kind, b.req.Seq, b.fn
	b.mu.Unlock()
	c.w.log.Warn("mpi backend: a blocking MPI call is given up but MPI cannot interrupt it; it returns when every rank has joined it",
		"op", kind, "seq", seq, "mpi", fn, "reason", why, "job_abort_in", stuckGrace)
	c.w.abort(&core.OpError{Op: kind, Rank: c.rank, Peer: -1, Seq: seq,
		Err: fmt.Errorf("%w in %s: MPI cannot interrupt a blocking call", why, fn)})
}
