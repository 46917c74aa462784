package transport

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/internal/clock"
)

// A started ring send (a stream) is a message too large to sit in its
// ring at once, written as the peer frees room by whichever goroutine of
// this rank is there: the poller while a receive waits (drive), else a
// stream's finish. A collective's step starts its sends and receives on
// one goroutine; with a goroutine per send, as before, the sender spun for
// room beside its own receive, and two spinning goroutines in each of two
// processes took turns on two cores, and large all-to-alls stalled.

// ringStream is one started ring send. The goroutine that holds busy
// writes its records.
type ringStream struct {
	o         *ringOut
	h         Header
	payload   []byte
	busy      atomic.Bool
	lastWrite atomic.Int64  // when a record was last written (clock.Nanos)
	ended     chan struct{} // closed once every record is out, or the send failed with err
	wake      chan struct{} // capacity 1: the poller role was let go
	// patience is how long s waits for room before it asks the peer's
	// drainer to make some (see wakeDrainer).
	patience time.Duration

	// Guarded by busy.
	done      int  // bytes written
	published int  // records published
	locked    bool // s holds o.lock
	err       error
}

// streams is the set of an endpoint's unfinished streams, oldest first.
type streams struct {
	n  atomic.Int32 // len(list), read without mu
	mu sync.Mutex
	// list is copied on write: pump ranges over a snapshot.
	list []*ringStream
}

func (ss *streams) add(s *ringStream) {
	ss.mu.Lock()
	ss.list = append(slices.Clip(ss.list), s)
	ss.n.Store(int32(len(ss.list)))
	ss.mu.Unlock()
}

func (ss *streams) remove(s *ringStream) {
	ss.mu.Lock()
	ss.list = slices.DeleteFunc(slices.Clone(ss.list), func(x *ringStream) bool { return x == s })
	ss.n.Store(int32(len(ss.list)))
	ss.mu.Unlock()
}

func (ss *streams) snapshot() []*ringStream {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.list
}

// first reports whether s is the oldest stream of its ring: the streams
// of one ring take its lock in the order they started.
func (ss *streams) first(s *ringStream) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, x := range ss.list {
		if x.o == s.o {
			return x == s
		}
	}
	return false
}

// on reports whether a stream through o is unfinished.
func (ss *streams) on(o *ringOut) bool {
	if ss.n.Load() == 0 {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, x := range ss.list {
		if x.o == o {
			return true
		}
	}
	return false
}

// startStream starts sending payload through o: it writes what fits now
// (once the ring is free of other messages: streams through it started
// before, or a send of another goroutine) and returns the finish that
// waits for the rest. The caller holds mapMu shared and has taken a
// reference on the mapping for finish to drop.
func (e *shmEndpoint) startStream(o *ringOut, h *Header, payload []byte, patience time.Duration) (finish func(context.Context) error) {
	s := &ringStream{o: o, h: *h, payload: payload, ended: make(chan struct{}), wake: make(chan struct{}, 1), patience: patience}
	s.lastWrite.Store(clock.Nanos())
	s.busy.Store(true)
	e.streams.add(s)
	e.writeSome(s)
	s.busy.Store(false)
	if isClosed(s.ended) {
		e.unrefMap()
		return sendDone(nil)
	}
	return func(ctx context.Context) error { return e.finishStream(ctx, s) }
}

// writeSome writes the records of s that fit in its ring now, ends s once
// they are all out, and reports whether it wrote any. The caller holds
// s.busy.
func (e *shmEndpoint) writeSome(s *ringStream) bool {
	if isClosed(s.ended) {
		return false
	}
	if !s.locked {
		if !e.streams.first(s) || !s.o.lock.held.CompareAndSwap(0, 1) {
			return false
		}
		s.locked = true
	}
	o, total := s.o, len(s.payload)
	wrote := false
	for s.done < total || s.published == 0 {
		n := min(e.chunk, total-s.done)
		off, ok := tryReserve(o, recordSpan(n))
		if !ok {
			break
		}
		writeRecord(o, off, &s.h, total, s.published, s.payload[s.done:s.done+n])
		s.published++
		s.done += n
		wrote = true
	}
	if wrote {
		s.lastWrite.Store(clock.Nanos())
	}
	if s.done == total && s.published > 0 {
		e.endStream(s, nil)
	}
	return wrote
}

// endStream ends s with err (nil: every record is out) and lets its ring
// go. The caller holds s.busy.
func (e *shmEndpoint) endStream(s *ringStream, err error) {
	s.err = err
	close(s.ended)
	e.streams.remove(s)
	if s.locked {
		s.locked = false
		s.o.lock.unlock()
	}
}

// pump writes what fits of every stream nobody else is writing and
// reports whether it wrote anything.
func (e *shmEndpoint) pump() bool {
	wrote := false
	for _, s := range e.streams.snapshot() {
		if !s.busy.CompareAndSwap(false, true) {
			continue
		}
		if e.writeSome(s) {
			wrote = true
		}
		s.busy.Store(false)
	}
	return wrote
}

// roleFreed tells the finishes waiting for a poller to write their
// streams (finishStream) that the role was let go: they write the rest
// themselves.
func (e *shmEndpoint) roleFreed() {
	for _, s := range e.streams.snapshot() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// streamsWait prepares the poller's sleep while streams of this rank wait
// for room, and returns the bound of the sleep: a consumer that frees room
// wakes the ring's space word (for finishStream), not the poller's.
func (e *shmEndpoint) streamsWait() time.Duration {
	now := clock.Nanos()
	for _, s := range e.streams.snapshot() {
		s.wakeDrainer(now)
	}
	return streamSleep
}

// wakeDrainer asks the peer's drainer to take in what s wrote, once s has
// waited for room for its patience. A started send waits streamPatience:
// the receive for it is about to be posted (a collective's step posts it
// after its own local copies), and the drainer would copy the message
// into a buffer of its own, then again into the receive's, on a thread of
// its own beside the peer's, several times slower for a large
// all-to-all. A blocking Send asks as soon as its wait gets
// to sleep, as waitHead does: its receive may come only after a send of
// the peer's own.
func (s *ringStream) wakeDrainer(now int64) {
	if now-s.lastWrite.Load() >= int64(s.patience) {
		s.o.cons.wakeDrainer()
	}
}

const (
	// streamSleep bounds a poller's sleep while a stream waits for room,
	// and a finish's wait while a poller writes its stream.
	streamSleep = time.Millisecond
	// streamPatience is a started send's patience (see wakeDrainer).
	streamPatience = 20 * time.Millisecond
)

// finishStream is the finish of a stream: it writes the rest (and what
// fits of the other streams, which may have to go first) as room appears,
// waiting as waitHead does.
func (e *shmEndpoint) finishStream(ctx context.Context, s *ringStream) error {
	defer e.unrefMap()
	o := s.o
	failed, lost := e.mb.failedCh, e.mb.lostChan(o.peer)
	bo := Backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		why := roomGone(ctx, o, failed, lost)
		wrote := e.pump()
		if s.busy.CompareAndSwap(false, true) {
			if !isClosed(s.ended) && why != nil {
				e.endStream(s, why)
			}
			ended, published, err := isClosed(s.ended), s.published, s.err
			s.busy.Store(false)
			if ended {
				return e.sendResult(o.peer, published, err)
			}
		}
		if wrote {
			bo.reset()
			continue
		}
		if e.role.Load() != 0 {
			// A receive polls the rings and writes s as room appears
			// (drive): wait for it, rather than spin beside it.
			if timer == nil {
				timer = time.NewTimer(streamSleep)
			} else {
				timer.Reset(streamSleep)
			}
			select {
			case <-s.ended:
			case <-s.wake:
			case <-timer.C:
			case <-ctx.Done():
			case <-failed:
			case <-lost:
			}
			continue
		}
		switch bo.Next() {
		case PhaseYield:
			bo.YieldCPU()
		case PhaseSleep:
			e.sleepForRoom(ctx, o, max(s.patience, streamSleep), failed, lost,
				func() { s.wakeDrainer(clock.Nanos()) },
				func() bool {
					if !s.busy.CompareAndSwap(false, true) {
						return true // being written: look again
					}
					fits := isClosed(s.ended) || (s.locked && e.nextFits(s))
					s.busy.Store(false)
					return fits
				})
		}
	}
}

// nextFits reports whether the next record of s fits in its ring now
// (tryReserve: the lap's padding before it, if it needs one, is written
// already). The caller holds s.busy and s holds the ring's lock.
func (e *shmEndpoint) nextFits(s *ringStream) bool {
	_, ok := tryReserve(s.o, recordSpan(min(e.chunk, len(s.payload)-s.done)))
	return ok
}
