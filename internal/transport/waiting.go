package transport

import (
	"fmt"
	"sync"
	"time"
)

// Waiting notices (WaitNotifier): a rank that has waited a while for a
// peer tells every other rank so, in a waiting frame over TCP (a Hybrid
// endpoint has a TCP connection to every peer, also those it reaches
// through shared memory). A notice holds for the time it says, so one
// whose retraction was lost (a partition) expires by itself.

// waitNotice is what a waiting frame says.
type waitNotice struct {
	rank  int // world rank waited for; -1 none
	valid time.Duration
}

// heardWait is a peer's last notice as received.
type heardWait struct {
	rank  int // -1: none
	until time.Time
}

// waitNotices is an endpoint's notice state: what each peer said, and
// for TCP the notice to write to each peer.
type waitNotices struct {
	mu      sync.Mutex  // protects following
	heard   []heardWait // by peer
	want    []waitNotice
	pending []bool // want[peer] is not written yet
	writing []bool // a writer goroutine runs for peer
}

func newWaitNotices(size int) waitNotices {
	heard := make([]heardWait, size)
	for i := range heard {
		heard[i].rank = -1
	}
	return waitNotices{heard: heard, want: make([]waitNotice, size), pending: make([]bool, size), writing: make([]bool, size)}
}

// hear records peer's notice.
func (n *waitNotices) hear(peer int, w waitNotice) {
	n.mu.Lock()
	n.heard[peer] = heardWait{rank: w.rank, until: time.Now().Add(w.valid)}
	n.mu.Unlock()
}

// peerWaiting is PeerWaiting.
func (n *waitNotices) peerWaiting(peer int) int {
	if peer < 0 || peer >= len(n.heard) {
		return -1
	}
	n.mu.Lock()
	h := n.heard[peer]
	n.mu.Unlock()
	if h.rank < 0 || !time.Now().Before(h.until) {
		return -1
	}
	return h.rank
}

// validNotice reports whether rank (waited for by self in a world of
// size) can be noted.
func validNotice(self, size, rank int) bool {
	return rank >= -1 && rank < size && rank != self
}

// waitingHeader is the frame header of notice w.
func waitingHeader(w waitNotice) frameHeader {
	ms := min(max(w.valid.Milliseconds(), 0), maxWaitingValid)
	return frameHeader{typ: frameWaiting, h: Header{Comm: uint64(w.rank + 1), Seq: uint64(ms)}}
}

// waitingNotice decodes a waiting frame from a peer of a world of size
// ranks.
func waitingNotice(fh *frameHeader, size int) (waitNotice, error) {
	if fh.h.Comm > uint64(size) {
		return waitNotice{}, fmt.Errorf("protocol error: waiting frame names rank %d of a world of %d", int64(fh.h.Comm)-1, size)
	}
	return waitNotice{rank: int(fh.h.Comm) - 1, valid: time.Duration(fh.h.Seq) * time.Millisecond}, nil
}

// NoteWaiting tells every peer whom this rank waits for; see
// WaitNotifier. A rank outside the world (or this rank) is ignored.
func (t *TCP) NoteWaiting(rank int, valid time.Duration) {
	if !validNotice(t.rank, t.size, rank) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing || t.abortSent || isClosed(t.mb.failedCh) {
		return
	}
	n := &t.notices
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range t.conns {
		if c == nil {
			continue
		}
		n.want[c.peer], n.pending[c.peer] = waitNotice{rank: rank, valid: valid}, true
		if !n.writing[c.peer] {
			n.writing[c.peer] = true
			t.wg.Add(1) // under t.mu, not closing: Close waits for it
			go t.writeNotices(c)
		}
	}
}

// PeerWaiting returns whom peer last said it waits for; see WaitNotifier.
func (t *TCP) PeerWaiting(peer int) int { return t.notices.peerWaiting(peer) }

// Failed returns a channel closed once the endpoint has failed.
func (t *TCP) Failed() <-chan struct{} { return t.mb.failedCh }

// writeNotices writes c's pending notices until none is left.
func (t *TCP) writeNotices(c *tcpConn) {
	defer t.wg.Done()
	n := &t.notices
	for {
		n.mu.Lock()
		w, ok := n.want[c.peer], n.pending[c.peer]
		n.pending[c.peer] = false
		if !ok {
			n.writing[c.peer] = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		if !t.writeWaiting(c, w) {
			n.mu.Lock()
			n.writing[c.peer], n.pending[c.peer] = false, false
			n.mu.Unlock()
			return
		}
	}
}

// writeWaiting writes one waiting frame to c, waiting for the connection
// as long as it takes a data message to finish (its own ctx bounds it),
// and writing within the close timeout. It reports false when nothing
// more should be written: the endpoint failed or is closing, or the
// connection is gone.
func (t *TCP) writeWaiting(c *tcpConn, w waitNotice) bool {
	select {
	case c.writeLock <- struct{}{}:
	case <-t.closedCh:
		return false
	case <-c.readerDone:
		return false
	case <-t.mb.failedCh:
		return false // an abort needs the connection, not a notice
	}
	defer func() { <-c.writeLock }()
	if isClosed(t.mb.failedCh) {
		return false
	}
	fh := waitingHeader(w)
	var hb [headerSize]byte
	fh.encode(hb[:])
	c.conn.SetWriteDeadline(time.Now().Add(t.closeWait))
	n, err := c.conn.Write(hb[:])
	c.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		if n > 0 {
			c.conn.Close() // partly written: the stream is unusable
		}
		return false
	}
	return true
}

// NoteWaiting tells every peer whom this rank waits for (over TCP); see
// WaitNotifier.
func (e *Hybrid) NoteWaiting(rank int, valid time.Duration) { e.t.NoteWaiting(rank, valid) }

// PeerWaiting returns whom peer last said it waits for; see WaitNotifier.
func (e *Hybrid) PeerWaiting(peer int) int { return e.t.PeerWaiting(peer) }

// Failed returns a channel closed once the endpoint has failed.
func (e *Hybrid) Failed() <-chan struct{} { return e.t.Failed() }

// Err returns why the endpoint failed (an abort, a lost peer, Close), or
// nil while it has not.
func (e *Hybrid) Err() error { return e.mb.failed() }

// NoteWaiting tells every live peer whom this rank waits for; see
// WaitNotifier.
func (e *Inproc) NoteWaiting(rank int, valid time.Duration) {
	if !validNotice(e.rank, len(e.world), rank) || isClosed(e.mb.failedCh) {
		return
	}
	for _, p := range e.world {
		if p != e {
			p.notices.hear(e.rank, waitNotice{rank: rank, valid: valid})
		}
	}
}

// PeerWaiting returns whom peer last said it waits for; see WaitNotifier.
func (e *Inproc) PeerWaiting(peer int) int { return e.notices.peerWaiting(peer) }

// Failed returns a channel closed once the endpoint has failed.
func (e *Inproc) Failed() <-chan struct{} { return e.mb.failedCh }
