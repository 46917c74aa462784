// Package opctx bounds a communicator's operations by its default timeout
// when the caller's context has no deadline, without allocating per
// operation: Context, recycled by a Pool (operations started on any
// goroutine) or an Owned (operations that run one at a time, such as
// those holding a communicator's turn).
package opctx

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/internal/clock"
)

// Context bounds one operation by the communicator's default timeout when
// the caller's context has no deadline. context.WithTimeout would allocate a
// context, a channel and a timer per call, which a latency-bound loop of
// small collectives feels (the allocations, and the garbage collections
// they cause on the other ranks' critical path); a Context is recycled
// by its communicator (Pool, Owned), and its channel, timer and watch
// on the parent exist only once somebody waits on Done, which the
// transports do only after polling for a while. Err is exact without
// them: it compares the clock with the deadline.
//
// Polling loops must call Err, not Done; context.AfterFunc and derived
// contexts register with AfterFunc below.
//
// What Done sets up stays for the next operation, so that an operation
// that waits (a small receive over TCP blocks on Done) pays for none of it:
// the channel; the timer, which is never stopped or reset between
// operations but, when it fires, ends the operation armed then if that
// one's deadline has passed, and otherwise waits on for it (deadlines are
// timeouts, seconds to minutes, so it fires about once per timeout); and
// the watch on the parent (context.AfterFunc), kept while the next
// operations' parent has the same Done channel (by a Pool's contexts;
// an Owned's stops at Put). Resetting the timer, reading the clock and
// registering a watch on every Done cost three allocations and a
// noticeable part of a small TCP all-reduce under a cancellable parent
// (docs/performance.md). A context
// something else may watch (AfterFunc registered a function), cancelled,
// or whose timer ended it, is not reused.
type Context struct {
	parent  context.Context
	timeout time.Duration
	pool    *Pool // takes o back on Release (nil: an Owned's, or a test's that recycles by hand)
	// armed is set by the first Done of an operation (which AfterFunc
	// calls too), before it arms the timer or the parent's watch: until
	// then only the operation's own goroutines use o, and Release (or
	// Owned.Put) needs no lock.
	armed atomic.Bool

	mu sync.Mutex // protects following
	// deadline is clock.Nanos' reading at which the operation times out;
	// 0 until first needed.
	deadline int64
	checks   uint32 // calls of Err, which reads the clock every 16th
	gen      uint64 // incremented by recycle: late callbacks ignore a reused context
	done     chan struct{}
	err      error
	// timer runs onTimer; timerAt is the deadline it was set for, and
	// timerSet says it has not fired since.
	timer    *time.Timer
	timerAt  int64
	timerSet bool
	// watched is the Done channel of the parent that the watch (stop,
	// made by context.AfterFunc) is registered with; nil: none.
	watched <-chan struct{}
	stop    func() bool
	// shared: AfterFunc registered a function (a derived context, or
	// context.AfterFunc), which may watch the channel from a goroutine
	// of its own: o is not reused.
	shared bool
	// funcs run (each in its own goroutine) when o is cancelled: context.
	// AfterFunc and contexts derived from o register here instead of
	// starting a goroutine that waits on Done.
	funcs map[uint64]func()
	next  uint64
}

// Pool is a communicator's idle operation contexts, at most
// maxIdle of them. Not a sync.Pool: an idle context may still
// be registered with a parent (its watch), and one that a sync.Pool
// dropped would stay in that parent's list of children as long as the
// parent lives; this pool lets go of a context only after stopping its
// watch and timer, and Close does so for all when the communicator closes.
type Pool struct {
	// last is the context released last, taken and put back without the
	// lock: the common case, one operation at a time, costs one atomic
	// operation each way, as close to sync.Pool's per-P slot as a pool
	// shared by goroutines gets (a lock is a visible part of a small
	// shared-memory all-reduce).
	last   atomic.Pointer[Context]
	closed atomic.Bool
	mu     sync.Mutex // protects idle
	idle   []*Context
}

// maxIdle bounds a Pool: as many as operations a
// communicator runs at once, commonly.
const maxIdle = 8

// Get returns parent bounded by timeout from (about) now: the deadline is
// fixed when first needed, which an operation's first message does.
// Release it when the operation is over and nothing uses the context any
// more.
func (p *Pool) Get(parent context.Context, timeout time.Duration) *Context {
	o := p.last.Swap(nil)
	if o == nil {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			o = p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
		}
		p.mu.Unlock()
	}
	if o == nil {
		o = &Context{pool: p}
	}
	o.parent, o.timeout = parent, timeout
	return o
}

// put keeps o for another operation, or lets it go.
func (p *Pool) put(o *Context) {
	if p.last.CompareAndSwap(nil, o) {
		if p.closed.Load() {
			// close may have emptied last before o got there.
			if o := p.last.Swap(nil); o != nil {
				o.dismiss()
			}
		}
		return
	}
	p.mu.Lock()
	if !p.closed.Load() && len(p.idle) < maxIdle-1 {
		p.idle = append(p.idle, o)
		o = nil
	}
	p.mu.Unlock()
	if o != nil {
		o.dismiss()
	}
}

// Close lets every idle context go, and every one released later.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed.Store(true)
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	if o := p.last.Swap(nil); o != nil {
		idle = append(idle, o)
	}
	for _, o := range idle {
		o.dismiss()
	}
}

// Owned is a Context for operations that run one at a time, each taking
// it with Get and giving it back with Put before the next may start (a
// communicator's inline collectives, which hold its turn): no atomic
// operation either way, where a Pool's take two. Its context keeps its
// channel and timer from
// one operation to the next, but not its watch on a parent, which Put
// stops: nothing closes an Owned, and one dropped must leave no parent
// holding its context (its timer, if set, fires once and lets go).
type Owned struct {
	o *Context
}

// Get returns parent bounded by timeout from (about) now, as Pool.Get.
func (s *Owned) Get(parent context.Context, timeout time.Duration) *Context {
	o := s.o
	if o == nil {
		o = &Context{}
		s.o = o
	}
	o.parent, o.timeout = parent, timeout
	return o
}

// Put ends the operation of o, which Get returned; a context somebody may
// still watch (a derived context) is not reused.
func (s *Owned) Put(o *Context) {
	if o.armed.Load() {
		o.mu.Lock()
		o.unwatchLocked()
		o.mu.Unlock()
	}
	if !o.recycle() {
		o.dismiss()
		s.o = nil
	}
}

// deadlineLocked returns the deadline, fixing it if needed.
func (o *Context) deadlineLocked() int64 {
	if o.deadline == 0 {
		o.deadline = deadlineFrom(clock.Nanos(), o.timeout)
	}
	return o.deadline
}

// deadlineFrom is now + timeout, saturated: a timeout of centuries must
// not wrap around into the past.
func deadlineFrom(now int64, timeout time.Duration) int64 {
	if int64(timeout) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(timeout)
}

// Release recycles o: back to its pool, unless somebody may still watch
// its Done channel (a context derived from o, from a goroutine of its
// own), in which case o stays as it is, cancelled, for the garbage
// collector.
func (o *Context) Release() {
	if o.recycle() && o.pool != nil {
		o.pool.put(o)
		return
	}
	o.dismiss()
}

// recycle readies o for another operation and reports whether it can
// serve one (Release's decision, apart from the pool).
func (o *Context) recycle() bool {
	if !o.armed.Load() {
		// Not armed in this operation: Done was not called, so no timer
		// or watch acts on it, and a channel made earlier is open and
		// unwatched.
		o.parent, o.err, o.deadline, o.checks = nil, nil, 0, 0
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen++
	if !o.shared && o.err == nil {
		// The timer and the watch stay: they find no armed operation, or
		// the next one.
		o.armed.Store(false)
		o.parent, o.deadline, o.checks = nil, 0, 0
		return true
	}
	// Somebody may watch the channel still: o stays, cancelled.
	if o.err == nil {
		o.cancelLocked(context.Canceled)
	}
	return false
}

// dismiss stops o's timer and its watch on a parent: o serves no more
// operations.
func (o *Context) dismiss() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil {
		o.timer.Stop()
		o.timerSet = false
	}
	o.unwatchLocked()
}

func (o *Context) unwatchLocked() {
	if o.stop != nil {
		o.stop()
	}
	o.stop, o.watched = nil, nil
}

func (o *Context) Deadline() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return clock.Base().Add(time.Duration(o.deadlineLocked())), true
}

func (o *Context) Value(key any) any { return o.parent.Value(key) }

// Err reports the parent's error, else context.DeadlineExceeded once the
// deadline has passed, and closes Done's channel when it exists. Polling
// loops call Err often: it reads the clock on every 16th call only, from
// the 16th, so it may see the deadline a few polls late (Done's timer is
// exact), and an operation that ends within 15 calls never reads it (a
// clock read costs 60-300 ns on virtual machines, as much as an 8-byte
// exchange). The deadline, unless Deadline or Done fixed it earlier,
// counts from that first reading: polls are microseconds apart, timeouts
// seconds.
func (o *Context) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		if err := o.parent.Err(); err != nil {
			o.cancelLocked(err)
		} else if o.checks++; o.checks&15 == 0 {
			now := clock.Nanos()
			if o.deadline == 0 {
				o.deadline = deadlineFrom(now, o.timeout)
			} else if now >= o.deadline {
				o.cancelLocked(context.DeadlineExceeded)
			}
		}
	}
	return o.err
}

// Done arms o on first use in an operation: the channel, the timer for
// the deadline and the watch on the parent, each made or moved only when
// the last operation's does not serve (see Context).
func (o *Context) Done() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.armed.Load() {
		return o.done
	}
	o.armed.Store(true)
	if o.done == nil {
		o.done = make(chan struct{})
	}
	if o.err != nil {
		// Cancelled before: cancelLocked found no channel to close.
		close(o.done)
		return o.done
	}
	deadline := o.deadlineLocked()
	switch {
	case o.timer == nil:
		o.timer = time.AfterFunc(time.Duration(deadline-clock.Nanos()), o.onTimer)
		o.timerAt, o.timerSet = deadline, true
	case !o.timerSet || o.timerAt > deadline:
		// Idle, or set for later than this operation's deadline (a
		// shorter timeout than the last one's): it fires early and waits
		// on otherwise.
		o.timer.Reset(time.Duration(deadline - clock.Nanos()))
		o.timerAt, o.timerSet = deadline, true
	}
	if pd := o.parent.Done(); pd != o.watched {
		o.unwatchLocked()
		if pd != nil {
			o.watched = pd
			o.stop = context.AfterFunc(o.parent, func() { o.parentDone(pd) })
		}
	}
	return o.done
}

// parentDone cancels the armed operation whose parent's Done channel is
// pd, which was closed.
func (o *Context) parentDone(pd <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watched != pd {
		return // a watch stopped too late
	}
	o.stop, o.watched = nil, nil // it ran: the next Done registers anew
	// An armed operation's Done registered the watch for its own parent
	// (or moved it there): pd is that parent's.
	if o.armed.Load() && o.err == nil {
		o.cancelLocked(o.parent.Err())
	}
}

// onTimer ends the operation armed when it fires if that one's deadline
// has passed, and otherwise waits on for it; with no operation armed it
// stays idle until the next Done.
func (o *Context) onTimer() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.timerSet = false
	if !o.armed.Load() || o.err != nil || o.deadline == 0 {
		return
	}
	if left := o.deadline - clock.Nanos(); left > 0 {
		o.timer.Reset(time.Duration(left))
		o.timerAt, o.timerSet = o.deadline, true
		return
	}
	o.cancelLocked(context.DeadlineExceeded)
}

func (o *Context) cancelLocked(err error) {
	o.err = err
	if o.done != nil {
		close(o.done)
	}
	for id, f := range o.funcs {
		delete(o.funcs, id)
		go f()
	}
}

// AfterFunc arranges for f to run in its own goroutine once o is
// cancelled (at once if it is) and returns a function that unregisters
// f, reporting whether it did so before f was started. The context
// package uses it for context.AfterFunc and for contexts derived from o.
func (o *Context) AfterFunc(f func()) func() bool {
	o.Done() // arms the deadline timer and the parent's watch
	o.mu.Lock()
	defer o.mu.Unlock()
	o.shared = true
	if o.err != nil {
		go f()
		return func() bool { return false }
	}
	if o.funcs == nil {
		o.funcs = make(map[uint64]func())
	}
	id, gen := o.next, o.gen
	o.next++
	o.funcs[id] = f
	return func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.gen != gen {
			return false
		}
		_, ok := o.funcs[id]
		delete(o.funcs, id)
		return ok
	}
}

func (o *Context) String() string { return "opctx.Context" }
