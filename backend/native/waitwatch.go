package native

import (
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/internal/transport"
)

// A rank that waits long for a peer tells the other ranks so (through a
// transport.WaitNotifier endpoint), so that a rank whose wait for it
// times out can name the rank at the end of the chain of waits at once:
// the rank a hierarchical step's leader waits for on a lost host, say,
// rather than the leader. The collective's goroutine only marks whom it
// waits for (an atomic store when the peer changes, a load when it does
// not: an atomic read-modify-write per wait would cost more than the
// wait's bookkeeping) and
// clears the mark when it returns; a watcher goroutine, running only
// while collectives run, notices a mark that lasts and sends the notices.
// Between two waits of a collective the mark stays on the last peer: a
// step's local work that outlasts an interval may be told as a wait.

// waitWatch is a world's record of the peer it waits for.
type waitWatch struct {
	wn       transport.WaitNotifier // nil: nothing to tell
	interval time.Duration          // how often the watcher looks
	// slot is the current wait: the epoch it began in << waitPeerBits |
	// (world rank waited for + 1); zero when nothing waits.
	slot atomic.Uint64
	// epoch counts the watcher's looks (and starts): a wait that began
	// in epoch e has lasted at least an interval once epoch is e+2. A
	// load, not a counter bumped by every wait, keeps begin cheap.
	epoch   atomic.Uint64
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

// begin marks the start of a wait for world rank peer. A mark stands
// until the next, or until done: a collective marks each wait it starts
// and calls done when it returns. Marking the wait already marked (the
// same peer, within the same epoch) costs a load. Safe on a nil or
// inactive watch.
func (w *waitWatch) begin(peer int) {
	if w == nil || w.wn == nil {
		return
	}
	v := w.epoch.Load()<<waitPeerBits | uint64(peer+1)
	old := w.slot.Load()
	if old == v {
		return
	}
	w.slot.Store(v)
	if old != 0 && w.noticed.Load() == old {
		w.wake() // the wait the peers know of has ended: retract it now
	}
	if !w.running.Load() && w.running.CompareAndSwap(false, true) {
		go w.watch()
	}
}

// done marks the end of a collective's waits.
func (w *waitWatch) done() {
	if w == nil || w.wn == nil {
		return
	}
	old := w.slot.Load()
	if old == 0 {
		return
	}
	w.slot.Store(0)
	if w.noticed.Load() == old {
		w.wake()
	}
}

// wake has the watcher look at once.
func (w *waitWatch) wake() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// close stops the watcher, if one runs.
func (w *waitWatch) close() {
	if w != nil && w.wn != nil {
		close(w.stop)
	}
}

// watch is the watcher goroutine. It tells the peers about a wait that
// has lasted at least an interval, renews the notice while the wait goes
// on, retracts it when the wait ends, and returns once nothing has waited
// for a few intervals.
func (w *waitWatch) watch() {
	w.epoch.Add(1) // waits that began before this goroutine count from now
	t := time.NewTicker(w.interval)
	defer t.Stop()
	told := uint64(0) // the wait the peers were told of, not retracted yet
	idle := 0
	for {
		select {
		case <-w.stop:
			w.running.Store(false)
			return
		case <-t.C:
			w.epoch.Add(1)
		case <-w.poke:
		}
		v := w.slot.Load()
		switch {
		case v != 0 && w.epoch.Load() >= v>>waitPeerBits+2:
			w.noticed.Store(v)
			w.wn.NoteWaiting(int(v&waitPeerMask)-1, noticeValid(w.interval))
			told = v
		case told != 0 && v != told:
			w.wn.NoteWaiting(-1, 0)
			told = 0
		}
		if v != 0 || told != 0 {
			idle = 0
			continue
		}
		if idle++; idle < 4 {
			continue
		}
		// Nothing waits: stop, unless a wait began meanwhile and saw this
		// goroutine still running.
		w.running.Store(false)
		if w.slot.Load() == 0 || !w.running.CompareAndSwap(false, true) {
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
