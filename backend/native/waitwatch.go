package native

import (
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/transport"
)

// A rank that waits long for a peer tells the other ranks so (through a
// transport.WaitNotifier endpoint), so that a rank whose wait for it
// times out can name the rank at the end of the chain of waits at once:
// the rank a hierarchical step's leader waits for on a lost host, say,
// rather than the leader. The collective's goroutine only marks the start
// and end of each wait (a few atomic operations); a watcher goroutine,
// running only while waits happen, notices a wait that lasts and sends
// the notices.

// waitWatch is a world's record of the peer it waits for.
type waitWatch struct {
	wn       transport.WaitNotifier // nil: nothing to tell
	interval time.Duration          // how often the watcher looks
	// slot is the current wait: a generation number << waitPeerBits |
	// (world rank waited for + 1); low bits zero when nothing waits.
	slot    atomic.Uint64
	gen     atomic.Uint64
	noticed atomic.Uint64 // the slot value last told to the peers
	running atomic.Bool   // a watcher goroutine runs
	poke    chan struct{} // wakes the watcher at the end of a noticed wait
	stop    chan struct{} // closed when the world closes
}

const (
	waitPeerBits = 24
	waitPeerMask = 1<<waitPeerBits - 1
)

// waitInterval is how often the watcher looks at the current wait for a
// world whose collectives time out after timeout: a wait is told to the
// peers once it has lasted one to two intervals, so that they know it well
// before their own timers end.
func waitInterval(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return time.Second
	}
	return min(max(timeout/20, 10*time.Millisecond), time.Second)
}

// noticeValid is how long a notice holds unless renewed: three of the
// watcher's intervals, so that one renewal may be late.
func noticeValid(interval time.Duration) time.Duration { return 3 * interval }

func newWaitWatch(ep transport.Endpoint, timeout time.Duration) *waitWatch {
	w := &waitWatch{interval: waitInterval(timeout), poke: make(chan struct{}, 1), stop: make(chan struct{})}
	if wn, ok := ep.(transport.WaitNotifier); ok && ep.Size() > 2 && ep.Size() <= waitPeerMask {
		// With two ranks there is no third to name.
		w.wn = wn
	}
	return w
}

// begin marks the start of a wait for world rank peer and returns the
// token end takes. Safe on a nil or inactive watch.
func (w *waitWatch) begin(peer int) uint64 {
	if w == nil || w.wn == nil {
		return 0
	}
	v := w.gen.Add(1)<<waitPeerBits | uint64(peer+1)
	w.slot.Store(v)
	if !w.running.Load() && w.running.CompareAndSwap(false, true) {
		go w.watch()
	}
	return v
}

// end marks the end of the wait begin returned v for.
func (w *waitWatch) end(v uint64) {
	if v == 0 {
		return
	}
	w.slot.CompareAndSwap(v, v&^waitPeerMask)
	if w.noticed.Load() == v {
		select {
		case w.poke <- struct{}{}:
		default:
		}
	}
}

// close stops the watcher, if one runs.
func (w *waitWatch) close() {
	if w != nil && w.wn != nil {
		close(w.stop)
	}
}

// watch is the watcher goroutine. It tells the peers about a wait it has
// seen last for at least half an interval, renews the notice while the
// wait goes on, retracts it when the wait ends, and returns once nothing
// has waited for a few intervals.
func (w *waitWatch) watch() {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	var seen uint64 // the wait being watched
	var seenAt time.Time
	told := false // the peers were told of a wait not retracted yet
	idle := 0
	for {
		select {
		case <-w.stop:
			w.running.Store(false)
			return
		case <-t.C:
		case <-w.poke:
		}
		v := w.slot.Load()
		now := time.Now()
		if v&waitPeerMask == 0 {
			v = 0
		}
		switch {
		case v != 0 && v == seen && now.Sub(seenAt) >= w.interval/2:
			w.noticed.Store(v)
			w.wn.NoteWaiting(int(v&waitPeerMask)-1, noticeValid(w.interval))
			told = true
		case v != seen && told:
			w.wn.NoteWaiting(-1, 0)
			told = false
		}
		if v != seen {
			seen, seenAt = v, now
		}
		if v != 0 || told {
			idle = 0
			continue
		}
		if idle++; idle < 4 {
			continue
		}
		// Nothing waits: stop, unless a wait began meanwhile and saw this
		// goroutine still running.
		w.running.Store(false)
		if w.slot.Load()&waitPeerMask == 0 || !w.running.CompareAndSwap(false, true) {
			return
		}
		idle = 0
	}
}

// chain follows the notices from world rank peer, which this rank waited
// for in vain: the ranks peer waits for in turn, as far as they are known
// (each distinct, none this rank). The last is the rank to name.
func (w *waitWatch) chain(self, peer int) []int {
	if w == nil || w.wn == nil {
		return nil
	}
	var links []int
	seen := map[int]bool{self: true, peer: true}
	for cur := peer; ; {
		next := w.wn.PeerWaiting(cur)
		if next < 0 || seen[next] {
			return links
		}
		links = append(links, next)
		seen[next] = true
		cur = next
	}
}
