package transport

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Receiving from peers on this host. A receive makes progress on its own
// goroutine: one goroutine at a time holds the endpoint's poller role and
// drains the inbound rings (recv, await, drive), moving messages that
// other receives wait for, or that nobody waits for yet, to them or to the
// unexpected queue; the drainer goroutine (drainLoop) does the same for
// rings that fill up while nobody receives, so a send never waits for its
// receive.

// recv is Hybrid.Recv from a peer (or AnySource) that polls(peer): the
// calling goroutine polls the rings itself unless another receive already
// does.
//
// A non-nil sink takes the message's bytes instead of buf (recvOp.sink).
func (e *shmEndpoint) recv(ctx context.Context, peer int, h Header, buf []byte, sink func(int, []byte)) (int, error) {
	e.mapMu.RLock()
	defer e.mapMu.RUnlock()
	if e.unmapped {
		return -1, e.mb.failed()
	}
	holding := false
	bo := Backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	if sink == nil && len(buf) <= e.chunk && (peer != AnySource || len(e.ins) == e.size-1) && e.role.CompareAndSwap(0, 1) {
		holding = true
		if from, err, ok := e.recvDirect(ctx, peer, &h, buf, &bo); ok {
			e.role.Store(0)
			e.afterRole()
			return from, err
		}
	}
	r, from, _, err := e.mb.startRecvMode(ctx, peer, h, buf, false, sink)
	if r == nil {
		if holding {
			e.role.Store(0)
			e.afterRole()
		}
		return from, err
	}
	return e.await(ctx, r, holding, &bo)
}

// recvDirect is the fast path of a receive of a message that fits in one
// record, run by the poller: while the mailbox has nothing for the
// receive's key, it polls the ring(s) the message can come from and takes
// a matching message at a ring's head straight into buf, with no mailbox
// work at all. It reports false, having consumed nothing for h, when the
// general path must take over: something else is at the ring's head, the
// mailbox is not quiet, ctx ended, the endpoint failed, or the wait got
// long enough to sleep.
func (e *shmEndpoint) recvDirect(ctx context.Context, peer int, h *Header, buf []byte, bo *Backoff) (int, error, bool) {
	if !e.mb.quietFor(peer, h) {
		return -1, nil, false
	}
	var mine *ringIn
	if peer != AnySource {
		mine = e.in[peer]
	}
	key := keyOf(h)
	e.singleLazy = true
	// ctx.Err, not ctx.Done: a context may create its channel and timer
	// only once somebody waits on it, which the polling here never does.
	for polls := 0; ; polls++ {
		if e.mb.hasFailed.Load() || e.mb.nEarly.Load() > 0 || (polls&63 == 0 && ctx.Err() != nil) {
			return -1, nil, false
		}
		progress := false
		for _, in := range e.ins {
			if mine != nil && in != mine {
				// Not the receive's peer: its records go to the mailbox.
				if e.drainRing(in, nil) > 0 {
					progress = true
				}
				continue
			}
			switch e.takeDirect(in, key, h, buf) {
			case takeDone:
				return in.peer, nil, true
			case takeOther:
				return -1, nil, false
			}
		}
		if progress {
			bo.reset()
			continue
		}
		switch bo.Next() {
		case PhaseYield:
			bo.YieldCPU()
		case PhaseSleep:
			return -1, nil, false
		}
	}
}

type takeResult uint8

const (
	takeEmpty takeResult = iota // nothing at the ring's head
	takeDone                    // the message was taken into buf
	takeOther                   // something else is at the head
)

// takeDirect takes the message at in's head into buf if it is complete in
// one record, of h's key and signature, and len(buf) bytes long.
func (e *shmEndpoint) takeDirect(in *ringIn, key msgKey, h *Header, buf []byte) takeResult {
	if in.dead || in.bye || in.cur.active {
		return takeOther
	}
	size := len(in.d)
	for {
		off := int(in.next % uint64(size))
		if atomic.LoadUint64(recSeq(in.d, off)) != in.next+1 {
			return takeEmpty
		}
		kind, ln := recKind(in.d, off)
		if kind == recPad {
			e.freeRecord(in, size-off)
			continue
		}
		if kind != recFirst || ln != len(buf) {
			return takeOther
		}
		mh, total := getFirstHeader(in.d, off)
		if total != uint64(ln) || keyOf(&mh) != key || mh.Sig != h.Sig {
			return takeOther
		}
		copy(buf, in.d[off+recHeader:off+recHeader+ln])
		e.freeRecord(in, recordSpan(ln))
		return takeDone
	}
}

// freeRecord consumes the span bytes at in's head and wakes the producer
// if it waits for room.
func (e *shmEndpoint) freeRecord(in *ringIn, span int) {
	in.next += uint64(span)
	atomic.StoreUint64(in.ctl.head, in.next)
	if atomic.LoadUint32(in.ctl.waiting) != 0 {
		atomic.AddUint32(in.ctl.space, 1)
		futexWake(in.ctl.space)
	}
}

// await waits for a posted (or claimed) receive: as the poller when the
// role is free (or already held), else until the poller completes it or
// hands the role on. bo paces the polling (it may have started already).
func (e *shmEndpoint) await(ctx context.Context, r *recvOp, holding bool, bo *Backoff) (int, error) {
	e.waiters.Add(1)
	ctxDone, failed := ctx.Done(), e.mb.failedCh
	cancelled, unposted := false, false
	for !isClosed(r.done) {
		if holding || e.role.CompareAndSwap(0, 1) {
			holding = false
			unposted = e.drive(ctxDone, r, &cancelled, bo)
			e.role.Store(0)
			e.afterRole()
			if unposted {
				break
			}
			continue
		}
		select {
		case <-r.done:
		case <-e.handoff:
		case <-ctxDone:
			ctxDone, cancelled = nil, true
			if e.mb.cancelRecv(r) {
				unposted = true
			} else {
				e.me.wakePoller() // the poller must give the buffer back
			}
		case <-failed:
			failed = nil // the next poller releases what failed
		}
		if unposted {
			break
		}
	}
	e.waiters.Add(-1)
	if e.role.Load() == 0 && e.waiters.Load() > 0 {
		e.passRole()
	}
	if unposted {
		return -1, ctx.Err()
	}
	return r.result(ctx)
}

// drive polls the rings as the poller until r is done. If ctx ends first
// it withdraws r and reports true when r was still unmatched.
func (e *shmEndpoint) drive(ctxDone <-chan struct{}, r *recvOp, cancelled *bool, bo *Backoff) (unposted bool) {
	if *cancelled {
		ctxDone = nil
	}
	for {
		completed := e.completed
		// Until the wait gets long, single-copy messages nobody receives
		// yet wait in their rings for receives about to be posted.
		e.singleLazy = bo.phase != PhaseSleep
		progress := e.drainUntil(r) > 0
		if e.streams.n.Load() > 0 && e.pump() {
			progress = true
		}
		if isClosed(r.done) {
			return false
		}
		if e.completed != completed {
			// Another receive is done: let its goroutine (queued on this
			// thread) run now, so that it posts its next receive before
			// that message arrives and must be set aside.
			runtime.Gosched()
		}
		if isClosed(ctxDone) {
			ctxDone, *cancelled = nil, true
			if e.mb.cancelRecv(r) {
				return true
			}
			continue // the next pass gives back r's buffer
		}
		if progress {
			bo.reset()
			continue
		}
		switch bo.Next() {
		case PhaseYield:
			bo.YieldCPU()
		case PhaseSleep:
			d := maxSleep
			if e.streams.n.Load() > 0 {
				d = e.streamsWait()
			}
			atomic.AddUint32(e.me.sleepers, 1)
			v := atomic.LoadUint32(e.me.wake)
			if !e.ready() && !isClosed(r.done) {
				e.sleep(e.me.wake, v, d, ctxDone, r.done, e.mb.failedCh)
			}
			atomic.AddUint32(e.me.sleepers, ^uint32(0))
		}
	}
}

// afterRole runs after the poller role is released: a waiting receive
// takes it over, and a producer still waiting for room gets the drainer.
func (e *shmEndpoint) afterRole() {
	if e.waiters.Load() > 0 {
		e.passRole()
	}
	if e.streams.n.Load() > 0 {
		e.roleFreed()
	}
	if e.producerWaiting() {
		e.me.wakeDrainer()
	}
}

// passRole wakes one receive waiting for the role.
func (e *shmEndpoint) passRole() {
	select {
	case e.handoff <- struct{}{}:
	default:
	}
}

// drainLoop is the endpoint's drainer: on a timer, when a peer waiting
// for room in a ring has asked (bumped the drain word) and otherwise once
// per maxSleep, unless a receive already polls, it drains the rings as
// the poller until they are empty or a receive wants the role. It looks
// every drainPollMin after a request, backing off to drainPollMax while
// none comes.
//
// It does not sleep in a futex wait for the peers to wake, as it did: a
// goroutine blocked in a system call keeps its P, and a rank runs on one
// P, so the rank's own goroutine waited until the runtime's monitor took
// the P back, up to a monitor tick, and every such take sent the monitor
// back to polling at its fastest for a while, each poll a thread wake on
// the rank's CPU that stalled both ranks (runtime.handoffp after the
// drainer's futex wait; small all-reduces' tail latency grew tenfold).
// A timer parks the
// goroutine without a system call. A peer's request waits for the next
// look, at most drainPollMax; a drainer woken by a futex waited as long
// for a rank busy in Go code, whose P it needed.
func (e *shmEndpoint) drainLoop() {
	defer e.wg.Done()
	seen := atomic.LoadUint32(e.me.drain)
	wait := drainPollMin
	t := time.NewTimer(wait)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.drainStop:
			return
		case <-t.C:
		}
		asked := false
		if now := atomic.LoadUint32(e.me.drain); now != seen {
			seen, wait, asked = now, drainPollMin, true
		} else {
			wait = min(2*wait, drainPollMax)
		}
		// Unasked, it drains once per maxSleep, as the futex sleep's
		// timeout had it: a record nobody asks about (a closing peer's
		// goodbye, while this rank waits on the board) is taken in then.
		// Not at every look: mid-operation the drainer would take the
		// messages a receive is about to poll and copy them into buffers
		// of its own, which slowed large all-gathers.
		// A busy role needs no help: its holder drains, and asks again
		// when it lets go while a producer still waits (afterRole).
		if (asked || time.Since(last) >= maxSleep) && e.waiters.Load() == 0 && e.role.CompareAndSwap(0, 1) {
			last = time.Now()
			e.singleLazy = false
			e.drainAll()
			e.role.Store(0)
			if e.waiters.Load() > 0 {
				e.passRole()
			}
		}
		t.Reset(wait)
	}
}

// drainAll drains as the drainer: until nothing arrives for the length of
// a wait's spin and yield phases (it never sleeps holding the role), or a
// receive wants the role.
func (e *shmEndpoint) drainAll() {
	bo := Backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	for e.waiters.Load() == 0 && !isClosed(e.drainStop) {
		if e.drain() > 0 {
			bo.reset()
			continue
		}
		if !e.streaming() && !e.producerWaiting() {
			return
		}
		switch bo.Next() {
		case PhaseYield:
			bo.YieldCPU()
		case PhaseSleep:
			return
		}
	}
}
