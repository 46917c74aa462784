package comm

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// opContext bounds one operation by the communicator's default timeout when
// the caller's context has no deadline. context.WithTimeout would allocate a
// context, a channel and a timer per call, which a latency-bound loop of
// small collectives feels (the allocations, and the garbage collections
// they cause on the other ranks' critical path); an opContext is recycled,
// and its channel and timer exist only once somebody waits on Done, which
// the transports do only after polling for a while. Err is exact without
// them: it compares the clock with the deadline.
//
// Polling loops must call Err, not Done; context.AfterFunc and derived
// contexts register with AfterFunc below.
//
// The channel and the timer are kept for the next operation when only
// the operation's own goroutines took the channel (nothing registered
// with AfterFunc), nothing cancelled o, and the timer was stopped before
// it fired: a small receive over TCP that has to block asks for Done, and
// made them afresh every time (a channel, a timer and its callback: 3 of
// the 5 objects a 2-rank 8-byte all-reduce allocated per rank).
type opContext struct {
	parent  context.Context
	timeout time.Duration
	// armed is set by the first Done of an operation (which AfterFunc
	// calls too), before it arms the timer or the parent's watch: until
	// then only the operation's own goroutines use o, and release needs
	// no lock.
	armed atomic.Bool

	mu       sync.Mutex // protects following
	deadline time.Time  // zero until first needed: the clock costs tens of ns
	checks   uint32     // calls of Err, which reads the clock every 16th
	gen      uint64     // incremented by release: late callbacks ignore a reused context
	done     chan struct{}
	err      error
	timer    *time.Timer // runs onTimer; kept stopped between operations
	timerGen uint64      // the gen the timer is armed for
	stop     func() bool // stops the parent's AfterFunc
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

var opContexts = sync.Pool{New: func() any { return new(opContext) }}

// withOpTimeout returns parent bounded by timeout from (about) now: the
// deadline is fixed when first needed, which an operation's first message
// does. Release it when the operation is over and nothing uses the context
// any more.
func withOpTimeout(parent context.Context, timeout time.Duration) *opContext {
	o := opContexts.Get().(*opContext)
	o.parent, o.timeout = parent, timeout
	return o
}

func (o *opContext) deadlineLocked() time.Time {
	if o.deadline.IsZero() {
		o.deadline = time.Now().Add(o.timeout)
	}
	return o.deadline
}

// release stops the timers and recycles o, unless somebody took its Done
// channel: a context derived from o may still watch it from a goroutine
// of its own, so o then stays as it is, cancelled, for the garbage
// collector.
func (o *opContext) release() {
	if o.recycle() {
		opContexts.Put(o)
	}
}

// recycle readies o for another operation and reports whether it can
// serve one (release's decision, apart from the pool).
func (o *opContext) recycle() bool {
	if !o.armed.Load() {
		// Not armed in this operation: no timer runs, no callback is
		// registered, and a channel made earlier is open and unwatched.
		o.parent, o.err, o.deadline, o.checks = nil, nil, time.Time{}, 0
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// A timer that has fired may be about to run onTimer: only a timer
	// stopped in time can serve another operation.
	reuse := !o.shared && o.err == nil && (o.timer == nil || o.timer.Stop())
	if o.stop != nil {
		o.stop() // a parent's callback that started anyway finds gen moved on
		o.stop = nil
	}
	o.gen++
	if reuse {
		o.armed.Store(false)
		o.parent, o.deadline, o.checks = nil, time.Time{}, 0
		return true
	}
	// Somebody may watch the channel still: o stays, cancelled.
	if o.err == nil {
		o.cancelLocked(context.Canceled)
	}
	return false
}

func (o *opContext) Deadline() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deadlineLocked(), true
}

func (o *opContext) Value(key any) any { return o.parent.Value(key) }

// Err reports the parent's error, else context.DeadlineExceeded once the
// deadline has passed, and closes Done's channel when it exists. Polling
// loops call Err often: it reads the clock on every 16th call only, from
// the 16th, so it may see the deadline a few polls late (Done's timer is
// exact), and an operation that ends within 15 calls never reads it (a
// clock read costs 60-300 ns on virtual machines, as much as an 8-byte
// exchange). The deadline, unless Deadline or Done fixed it earlier,
// counts from that first reading: polls are microseconds apart, timeouts
// seconds.
func (o *opContext) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		if err := o.parent.Err(); err != nil {
			o.cancelLocked(err)
		} else if o.checks++; o.checks&15 == 0 {
			now := time.Now()
			if o.deadline.IsZero() {
				o.deadline = now.Add(o.timeout)
			} else if !now.Before(o.deadline) {
				o.cancelLocked(context.DeadlineExceeded)
			}
		}
	}
	return o.err
}

// Done arms o on first use in an operation: the channel (made once, see
// opContext), the timer for the deadline and a watch on the parent.
func (o *opContext) Done() <-chan struct{} {
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
	gen := o.gen
	o.timerGen = gen
	if o.timer == nil {
		o.timer = time.AfterFunc(time.Until(o.deadlineLocked()), o.onTimer)
	} else {
		o.timer.Reset(time.Until(o.deadlineLocked()))
	}
	if o.parent.Done() != nil {
		parent := o.parent
		o.stop = context.AfterFunc(parent, func() { o.cancel(gen, parent.Err()) })
	}
	return o.done
}

// onTimer cancels o at its deadline, unless the operation it was armed
// for is over.
func (o *opContext) onTimer() {
	o.mu.Lock()
	if o.timerGen == o.gen && o.err == nil {
		o.cancelLocked(context.DeadlineExceeded)
	}
	o.mu.Unlock()
}

func (o *opContext) cancel(gen uint64, err error) {
	o.mu.Lock()
	if o.gen == gen && o.err == nil {
		o.cancelLocked(err)
	}
	o.mu.Unlock()
}

func (o *opContext) cancelLocked(err error) {
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
func (o *opContext) AfterFunc(f func()) func() bool {
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

func (o *opContext) String() string { return "comm.opContext" }
