package transport

import "sync/atomic"

// peerLiveness is what a mailbox knows of its peers' departures: which
// said goodbye (gone), which were lost (their connection ended without
// one), and, for peers whose messages travel apart from their goodbye
// (inOrder: shared-memory rings beside a TCP connection), the goodbyes
// and losses that came out of band and wait for the peer's ring to be
// drained. It decides nothing about receives: the mailbox fails those
// that a departure leaves unservable. Guarded by mailbox.mu but for
// nEarly.
//
// Peers lost. A connection that ends without a goodbye (the peer's
// process was killed or exited without Close, or the network broke) is a
// loss only for operations that still need something from that peer:
// messages it sent before stay receivable, and receives from other peers
// go on. The first operation that does need it (a receive from it with
// nothing queued, one already waiting or half-written, an AnySource
// receive, a send to it) fails the whole mailbox with the loss: the
// operation's caller aborts the world and tells the others.
type peerLiveness struct {
	gone     []bool // peer said goodbye
	nGone    int
	lastGone int // the peer whose goodbye came last
	// inOrder marks peers whose messages travel apart from their goodbye:
	// their goodbye counts only when it arrives in order with the
	// messages (peerGoneInOrder); one announced out of band (peerGone) is
	// remembered in early. Nil when unused.
	inOrder []bool
	early   []bool
	// lost holds, per peer, why its connection ended without a goodbye
	// (a *PeerError wrapping ErrPeerLost): a loss only for operations
	// that still need that peer (see mailbox.peerLost). lostCh[peer] is
	// closed once lost[peer] is set. earlyLost is a loss of an inOrder
	// peer announced out of band, waiting for the peer's ring to be
	// drained; nEarly counts them (read without mu as a quick check).
	lost      []error
	lostCh    []chan struct{}
	nLost     int
	earlyLost []error
	nEarly    atomic.Int32
	// wakeRings, if set, asks whoever drains the rings of inOrder peers
	// to look at them now (an early loss waits for them).
	wakeRings func()
}

// init readies l for a world of size ranks.
func (l *peerLiveness) init(size int) {
	l.gone, l.lost, l.lostCh = make([]bool, size), make([]error, size), make([]chan struct{}, size)
	for p := range l.lostCh {
		l.lostCh[p] = make(chan struct{})
	}
}

// markGoneLocked records peer's goodbye; it reports false if the peer
// had said it already.
func (l *peerLiveness) markGoneLocked(peer int) bool {
	if l.gone[peer] {
		return false
	}
	l.gone[peer] = true
	l.nGone++
	l.lastGone = peer
	return true
}

// allGoneLocked reports whether every peer of a world of size ranks said
// goodbye.
func (l *peerLiveness) allGoneLocked(size int) bool { return l.nGone == size-1 }

// isInOrder reports whether peer's goodbye must come in order with its
// messages.
func (l *peerLiveness) isInOrder(peer int) bool { return l.inOrder != nil && l.inOrder[peer] }

// setInOrderLocked sets inOrder for peer (of a world of size ranks).
func (l *peerLiveness) setInOrderLocked(peer, size int, on bool) {
	if l.inOrder == nil {
		l.inOrder = make([]bool, size)
		l.early = make([]bool, size)
		l.earlyLost = make([]error, size)
	}
	l.inOrder[peer] = on
}

// takeEarlyGoneLocked clears and reports a goodbye of peer that came out
// of band.
func (l *peerLiveness) takeEarlyGoneLocked(peer int) bool {
	if !l.early[peer] {
		return false
	}
	l.early[peer] = false
	return true
}

// holdEarlyLostLocked remembers a loss of an inOrder peer until its ring
// is drained; it reports false if one is held already.
func (l *peerLiveness) holdEarlyLostLocked(peer int, perr error) bool {
	if l.earlyLost[peer] != nil {
		return false
	}
	l.earlyLost[peer] = perr
	l.nEarly.Add(1)
	return true
}

// takeEarlyLostLocked clears and returns the held loss of peer, or nil.
func (l *peerLiveness) takeEarlyLostLocked(peer int) error {
	perr := l.earlyLost[peer]
	if perr == nil {
		return nil
	}
	l.earlyLost[peer] = nil
	l.nEarly.Add(-1)
	return perr
}

// markLostLocked records that peer was lost (perr) and closes its
// lostChan.
func (l *peerLiveness) markLostLocked(peer int, perr error) {
	l.lost[peer] = perr
	l.nLost++
	close(l.lostCh[peer])
}

// lostFor returns a lost peer a receive from peer (or AnySource) needs,
// or -1.
func (l *peerLiveness) lostFor(peer int) int {
	if l.nLost == 0 {
		return -1
	}
	if peer != AnySource {
		if l.lost[peer] != nil {
			return peer
		}
		return -1
	}
	for p, err := range l.lost {
		if err != nil {
			return p
		}
	}
	return -1
}

// lostChan is closed once peer is lost (see mailbox.peerLost).
func (l *peerLiveness) lostChan(peer int) <-chan struct{} { return l.lostCh[peer] }
