package transport

import (
	"context"
	"sync"
)

// The mailbox matches arriving messages to posted receives; both endpoint
// implementations share it. Messages match on (Comm, Seq, Tag) and sender;
// per key, receives are served in posting order and messages from one
// sender in arrival order. A receive posted before its message registers
// its buffer so the message is written straight into it (arrive/claim); a
// message that arrives first is queued with its own buffer and copied at
// receive time.
//
// It is composed of one part per concern, each in its own file and all
// guarded by its mu: the queues that match (matchIndex,
// mailbox_match.go, with the records it reuses: spares,
// mailbox_spares.go), the peers' departures (peerLiveness,
// mailbox_liveness.go) and the terminal failure (failure,
// mailbox_failure.go). The mailbox's own methods are the operations that
// need more than one of them.

// arrival says what to do with the payload of an arriving message.
type arrival uint8

const (
	arriveQueue  arrival = iota // no receive waits: keep it in a fresh buffer, then deliver
	arriveDirect                // write it into the claimed receive's buffer, then complete
	arriveDrop                  // discard it (consumed by a failed receive, or mailbox failed)
)

type mailbox struct {
	rank, size int
	// failure's failedCh and hasFailed are read without mu; the rest of
	// it and the parts below are guarded by mu.
	failure

	mu sync.Mutex // protects following (and failure's err, closed)
	matchIndex
	peerLiveness
}

func newMailbox(rank, size int) *mailbox {
	mb := &mailbox{rank: rank, size: size}
	mb.failure.init()
	mb.matchIndex.init()
	mb.peerLiveness.init(size)
	return mb
}

// failed returns the mailbox's terminal error, or nil.
func (mb *mailbox) failed() error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.opErrLocked()
}

// sendErr returns why a send to peer must fail now, or nil.
func (mb *mailbox) sendErr(peer int) error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if err := mb.opErrLocked(); err != nil {
		return err
	}
	if mb.gone[peer] {
		return &PeerError{Peer: peer, Err: ErrPeerClosed}
	}
	if mb.lost[peer] != nil {
		return mb.needLostLocked(peer)
	}
	return nil
}

// fail ends the mailbox with err unless it has already failed: every posted
// receive fails with err, claimed receives are asked to stop, queued
// messages are dropped. It reports whether this call failed it.
func (mb *mailbox) fail(err error) bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.failLocked(err)
}

func (mb *mailbox) failLocked(err error) bool {
	if !mb.setLocked(err) {
		return false
	}
	for _, kq := range mb.byKey {
		for _, r := range kq.posted {
			mb.finishLocked(r, err)
		}
	}
	for r := range mb.claimed {
		r.askStop()
	}
	clear(mb.byKey)
	clear(mb.bySeq)
	clear(mb.inflight)
	mb.noteSizeLocked()
	return true
}

// close fails the mailbox with ErrClosed; later operations fail with
// ErrClosed even if it had been aborted before.
func (mb *mailbox) close() {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.failLocked(ErrClosed)
	mb.closed = true
}

// finishLocked completes a receive with an error.
func (mb *mailbox) finishLocked(r *recvOp, err error) {
	r.state = recvDone
	r.from = -1
	r.err = err
	r.markDone()
}

// doneChan returns r's done channel, making it for a quiet receive (whose
// owner alone may wait on it, once).
func (mb *mailbox) doneChan(r *recvOp) <-chan struct{} {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if r.done == nil {
		if r.state == recvDone {
			return closedChan
		}
		r.done = make(chan struct{}, 1)
	}
	return r.done
}

// recv is Endpoint.Recv on top of the mailbox; peer has been validated.
func (mb *mailbox) recv(ctx context.Context, peer int, h Header, buf []byte) (int, error) {
	from, _, err := mb.recvMode(ctx, peer, h, buf, false)
	return from, err
}

// recvMode is recv, or with upTo RecvUpTo's; it also returns the
// message's length.
func (mb *mailbox) recvMode(ctx context.Context, peer int, h Header, buf []byte, upTo bool) (from, n int, err error) {
	r, from, n, err := mb.startRecvMode(ctx, peer, h, buf, upTo, nil)
	if r == nil {
		return from, n, err
	}
	return mb.wait(ctx, r)
}

// recycle keeps a quiet receive that its owner is done with, and its
// channel if it has one, for the next one. Under mailbox.mu: markDone
// may be finishing.
func (mb *mailbox) recycle(r *recvOp) {
	if !r.quiet {
		return
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	done := r.done
	if done != nil {
		select {
		case <-done: // a token its owner did not wait for
		default:
		}
	}
	*r = recvOp{quiet: true, done: done}
	mb.keepRecv(r)
}

// wait is the second half of recvMode: it waits until the receive r from
// startRecvMode is done, or withdraws it when ctx ends first.
func (mb *mailbox) wait(ctx context.Context, r *recvOp) (from, n int, err error) {
	if r.isDone() {
		// Without asking ctx for its Done channel, which an operation's
		// context makes (a channel and a timer) on demand.
		return r.from, r.n, r.err
	}
	done := mb.doneChan(r)
	select {
	case <-done:
		return r.from, r.n, r.err
	case <-ctx.Done():
	}
	if mb.cancelRecv(r) {
		return -1, 0, ctx.Err()
	}
	<-done
	from, err = r.result(ctx)
	return from, r.n, err
}

// startRecvMode is the first half of recv: it returns r == nil with the
// result when a queued message (or an error) settles the receive at once,
// else the receive it posted, or claimed from an in-flight message, for
// the caller to wait on (r.done) or cancel (cancelRecv). With upTo it is
// RecvUpTo's; a receive settled at once also returns the message's length n.
//
// With a non-nil sink the message's bytes go to sink instead of buf
// (recvOp.sink); buf then only gives the length.
func (mb *mailbox) startRecvMode(ctx context.Context, peer int, h Header, buf []byte, upTo bool, sink func(int, []byte)) (r *recvOp, from, n int, err error) {
	return mb.startRecv(ctx, peer, h, buf, upTo, sink, false)
}

// startRecv is startRecvMode, with a quiet receive (see recvOp.quiet) if
// quiet is set.
func (mb *mailbox) startRecv(ctx context.Context, peer int, h Header, buf []byte, upTo bool, sink func(int, []byte), quiet bool) (r *recvOp, from, n int, err error) {
	if err := ctx.Err(); err != nil {
		return nil, -1, 0, err
	}
	mb.mu.Lock()
	if err := mb.opErrLocked(); err != nil {
		mb.mu.Unlock()
		return nil, -1, 0, err
	}
	if h.Seq != 0 {
		if sq := mb.bySeq[seqKey{h.Comm, h.Seq}]; sq != nil {
			for _, m := range sq.arrived {
				if m.h.Sig != h.Sig {
					mb.mu.Unlock()
					return nil, -1, 0, &MismatchError{Peer: m.from, Seq: h.Seq, Local: h.Sig, Remote: m.h.Sig}
				}
			}
		}
	}
	key := keyOf(&h)
	if kq := mb.byKey[key]; kq != nil {
		if m := kq.takeArrived(peer); m != nil {
			mb.dropKeyIfEmpty(key, kq)
			if h.Seq != 0 {
				mb.unqueueSeq(m)
			}
			mb.mu.Unlock()
			// A message that fails the checks is consumed all the
			// same: it was this receive's (MPI_ERR_TRUNCATE).
			if err := checkMatch(m.from, &m.h, len(m.data), &h, len(buf), upTo); err != nil {
				return nil, -1, 0, err
			}
			if sink != nil {
				sink(0, m.data)
			} else {
				copy(buf, m.data)
			}
			if m.pooled {
				putBig(m.data)
			}
			from, n := m.from, len(m.data)
			*m = message{}
			messages.Put(m)
			return nil, from, n, nil
		}
	}
	if peer != AnySource && mb.gone[peer] {
		mb.mu.Unlock()
		return nil, -1, 0, &PeerError{Peer: peer, Err: ErrPeerClosed}
	}
	if peer == AnySource && mb.nGone == mb.size-1 {
		mb.mu.Unlock()
		return nil, -1, 0, &PeerError{Peer: mb.lastGone, Err: ErrPeerClosed}
	}
	if lostPeer := mb.lostFor(peer); lostPeer >= 0 {
		err := mb.needLostLocked(lostPeer)
		mb.mu.Unlock()
		return nil, -1, 0, err
	}
	r = mb.newRecvLocked(quiet)
	r.peer, r.h, r.buf, r.upTo, r.sink = peer, h, buf, upTo, sink
	if im := mb.handoffLocked(key, peer, &h, len(buf), upTo); im != nil {
		r.state = recvClaimed
		r.from = im.from
		r.fit(im.n)
		r.wake = im.wake
		mb.claimed[r] = struct{}{}
		im.r = r
		im.handoff.Store(true)
	} else {
		mb.postLocked(r)
	}
	mb.mu.Unlock()
	return r, -1, 0, nil
}

// quietFor reports whether a receive of h from peer (or AnySource) may
// take the next message of its key straight from a shared-memory ring,
// bypassing the mailbox: the mailbox is live and holds nothing of the key
// (no queued message, posted receive or message in flight), nothing of
// h's (Comm, Seq) with another signature, and the peer has not left.
func (mb *mailbox) quietFor(peer int, h *Header) bool {
	if mb.empty.Load() && !mb.hasFailed.Load() && peer != AnySource {
		// Nothing queued, posted or in flight anywhere; a peer that left
		// through a ring ends it with a goodbye the caller sees first.
		return true
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.err != nil || mb.closed || (peer != AnySource && mb.gone[peer]) || mb.nGone > 0 && peer == AnySource ||
		mb.lostFor(peer) >= 0 || mb.nEarly.Load() > 0 {
		return false
	}
	key := keyOf(h)
	if mb.byKey[key] != nil || len(mb.inflight[key]) > 0 {
		return false
	}
	if h.Seq != 0 {
		if sq := mb.bySeq[seqKey{h.Comm, h.Seq}]; sq != nil {
			for _, r := range sq.posted {
				if r.h.Sig != h.Sig {
					return false
				}
			}
			if len(sq.arrived) > 0 {
				return false
			}
		}
	}
	return true
}

// cancelRecv withdraws a receive from startRecv whose ctx ended. It
// reports true if the receive was still waiting for a message (it is gone
// now; Recv returns ctx's error). Otherwise the receive is done, or a
// message is being written into its buffer and the writer is asked to
// give it back (at its next step); either way the caller waits for r.done
// and returns r.result.
func (mb *mailbox) cancelRecv(r *recvOp) bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	switch r.state {
	case recvPosted:
		mb.unpostLocked(r)
		r.state = recvDone
		return true
	case recvClaimed:
		r.askStop()
	}
	return false
}

// arriveStream is arrive for a reader that collects the payload over
// time: with arriveQueue it also returns an inflightMsg that a later
// receive may claim. The reader must end it with takeHandoff,
// deliverInflight or dropInflight. wake, if not nil, is how a receive
// that the message is written into (matched now, or claiming it later)
// asks the reader to look at its stop flag at once (recvOp.wake).
func (mb *mailbox) arriveStream(from int, h Header, n int, wake func()) (*recvOp, *inflightMsg, arrival) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	r, what := mb.matchLocked(from, &h, n)
	if what == arriveDirect {
		r.wake = wake
	}
	if what != arriveQueue {
		return r, nil, what
	}
	im := inflightMsgs.Get().(*inflightMsg)
	im.from, im.h, im.n, im.wake = from, h, n, wake
	mb.addInflightLocked(im)
	return nil, im, what
}

// takeHandoff returns the receive that claimed im (after im.handoff was
// seen); the reader now writes into its buffer and completes it.
func (mb *mailbox) takeHandoff(im *inflightMsg) *recvOp {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.takeInflightLocked(im)
}

// deliverInflight delivers a fully collected in-flight message. im is
// recycled: the caller must drop it.
func (mb *mailbox) deliverInflight(im *inflightMsg, data []byte, pooled bool) {
	mb.mu.Lock()
	r := mb.takeInflightLocked(im)
	from, h := im.from, im.h
	// Unregistered, im is the caller's alone (a receive that claimed it
	// kept no pointer to it).
	im.r, im.wake = nil, nil
	im.handoff.Store(false)
	inflightMsgs.Put(im)
	if r != nil {
		mb.mu.Unlock()
		r.put(0, data)
		mb.complete(r)
		if pooled {
			putBig(data)
		}
		return
	}
	mb.deliverLocked(from, h, data, pooled)
}

// dropInflight ends an in-flight message whose connection failed; the
// mailbox must have failed first.
func (mb *mailbox) dropInflight(im *inflightMsg) {
	mb.mu.Lock()
	r := mb.takeInflightLocked(im)
	mb.mu.Unlock()
	if r != nil {
		mb.abandon(r)
	}
}

// arrive is called when a message of n bytes from sender starts arriving.
// With arriveDirect the caller must write the payload into r.buf and call
// complete (or abandon); with arriveQueue it must collect the payload and
// call deliver.
func (mb *mailbox) arrive(from int, h Header, n int) (*recvOp, arrival) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.matchLocked(from, &h, n)
}

func (mb *mailbox) matchLocked(from int, h *Header, n int) (*recvOp, arrival) {
	if mb.err != nil {
		return nil, arriveDrop
	}
	if h.Seq != 0 {
		mb.failMismatchedLocked(from, h)
	}
	key := keyOf(h)
	kq := mb.byKey[key]
	if kq == nil {
		return nil, arriveQueue
	}
	r := kq.takePosted(from)
	if r == nil {
		return nil, arriveQueue
	}
	mb.dropKeyIfEmpty(key, kq)
	if h.Seq != 0 {
		sk := seqKey{h.Comm, h.Seq}
		if sq := mb.bySeq[sk]; sq != nil {
			sq.posted = removeItem(sq.posted, r)
			mb.dropSeqIfEmpty(sk, sq)
		}
	}
	if err := checkMatch(from, h, n, &r.h, len(r.buf), r.upTo); err != nil {
		mb.finishLocked(r, err)
		return nil, arriveDrop
	}
	r.state = recvClaimed
	r.from = from
	r.fit(n)
	mb.claimed[r] = struct{}{}
	return r, arriveDirect
}

// failMismatchedLocked fails every receive posted for h's (Comm, Seq) whose
// signature differs from h's: that rank called a different operation.
func (mb *mailbox) failMismatchedLocked(from int, h *Header) {
	sk := seqKey{h.Comm, h.Seq}
	sq := mb.bySeq[sk]
	if sq == nil {
		return
	}
	var bad []*recvOp
	for _, r := range sq.posted {
		if r.h.Sig != h.Sig {
			bad = append(bad, r)
		}
	}
	for _, r := range bad {
		mb.unpostLocked(r)
		mb.finishLocked(r, &MismatchError{Peer: from, Seq: h.Seq, Local: r.h.Sig, Remote: h.Sig})
	}
}

// deliver hands over a fully arrived message whose payload data the
// mailbox now owns: it is copied into a matching posted receive, or queued.
func (mb *mailbox) deliver(from int, h Header, data []byte) {
	mb.mu.Lock()
	mb.deliverLocked(from, h, data, false)
}

// deliverPooled is deliver for data from getBig, which returns to the
// pool once copied into a receive.
func (mb *mailbox) deliverPooled(from int, h Header, data []byte) {
	mb.mu.Lock()
	mb.deliverLocked(from, h, data, true)
}

// deliverLocked is deliver with mb.mu held; it unlocks it.
func (mb *mailbox) deliverLocked(from int, h Header, data []byte, pooled bool) {
	r, what := mb.matchLocked(from, &h, len(data))
	switch what {
	case arriveQueue:
		m := messages.Get().(*message)
		*m = message{from: from, h: h, data: data, pooled: pooled}
		mb.queueLocked(m)
		mb.mu.Unlock()
	case arriveDirect:
		mb.mu.Unlock()
		r.put(0, data)
		mb.complete(r)
		if pooled {
			putBig(data)
		}
	default:
		mb.mu.Unlock()
	}
}

// complete finishes a claimed receive whose buffer now holds its message.
func (mb *mailbox) complete(r *recvOp) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	delete(mb.claimed, r)
	r.state = recvDone
	r.err = nil
	r.markDone()
}

// abandon finishes a claimed receive without its message, after the
// writer has stopped touching its buffer: with the mailbox's error if it
// failed, else as abandoned (its ctx ended).
func (mb *mailbox) abandon(r *recvOp) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	delete(mb.claimed, r)
	err := mb.err
	if err == nil {
		err = errRecvAbandoned
	}
	mb.finishLocked(r, err)
}

// peerGone records peer's goodbye: receives that can only be served by it
// fail with ErrPeerClosed (queued messages stay receivable), and so do
// AnySource receives once every peer is gone.
func (mb *mailbox) peerGone(peer int) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.isInOrder(peer) {
		mb.early[peer] = true // applied in order, or by setInOrder
		return
	}
	mb.peerGoneLocked(peer)
}

// peerGoneInOrder is peerGone for a goodbye that arrived after every
// message of peer (see inOrder).
func (mb *mailbox) peerGoneInOrder(peer int) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.peerGoneLocked(peer)
}

// setInOrder says whether peer's goodbye must arrive in order with its
// messages (peerGoneInOrder) rather than out of band (peerGone). Turning
// it off applies a goodbye that came out of band meanwhile.
func (mb *mailbox) setInOrder(peer int, on bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.setInOrderLocked(peer, mb.size, on)
	if on {
		return
	}
	if mb.takeEarlyGoneLocked(peer) {
		mb.peerGoneLocked(peer)
	}
	if perr := mb.takeEarlyLostLocked(peer); perr != nil && mb.err == nil && !mb.gone[peer] {
		mb.lostLocked(peer, perr)
	}
}

func (mb *mailbox) peerGoneLocked(peer int) {
	if mb.err != nil || !mb.markGoneLocked(peer) {
		return
	}
	allGone := mb.allGoneLocked(mb.size)
	var dead []*recvOp
	for _, kq := range mb.byKey {
		for _, r := range kq.posted {
			if r.peer == peer || (r.peer == AnySource && allGone) {
				dead = append(dead, r)
			}
		}
	}
	for _, r := range dead {
		mb.unpostLocked(r)
		mb.finishLocked(r, &PeerError{Peer: peer, Err: ErrPeerClosed})
	}
}

// peerLost records that peer's connection ended without a goodbye
// (perr, a *PeerError wrapping ErrPeerLost). midMessage says a message
// of the peer was cut short: that is a loss now. For an inOrder peer the
// loss waits until its ring is drained (see applyEarlyLost), since
// messages it wrote there before it went may not have been taken in yet.
func (mb *mailbox) peerLost(peer int, perr error, midMessage bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.err != nil || mb.gone[peer] || mb.lost[peer] != nil {
		return
	}
	if midMessage {
		mb.failLocked(&AbortError{Cause: perr})
		return
	}
	if mb.isInOrder(peer) {
		if mb.holdEarlyLostLocked(peer, perr) && mb.wakeRings != nil {
			mb.wakeRings()
		}
		return
	}
	mb.lostLocked(peer, perr)
}

// applyEarlyLost applies an early loss of peer once its ring is drained
// (midMessage: it ends inside a message, which is then a loss now). It
// does nothing if peer has no early loss.
func (mb *mailbox) applyEarlyLost(peer int, midMessage bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	perr := mb.takeEarlyLostLocked(peer)
	if perr == nil {
		return
	}
	if mb.err != nil || mb.gone[peer] {
		return
	}
	if midMessage {
		mb.failLocked(&AbortError{Cause: perr})
		return
	}
	mb.lostLocked(peer, perr)
}

// hasEarlyLost reports whether peer's loss waits for its ring to drain.
func (mb *mailbox) hasEarlyLost(peer int) bool {
	if mb.nEarly.Load() == 0 {
		return false
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.earlyLost != nil && mb.earlyLost[peer] != nil
}

// lostLocked marks peer lost and fails the mailbox if a pending receive
// needs it: one posted for it (or for AnySource), or one claimed by a
// message of it being taken in.
func (mb *mailbox) lostLocked(peer int, perr error) {
	mb.markLostLocked(peer, perr)
	needed := false
	for _, kq := range mb.byKey {
		for _, r := range kq.posted {
			needed = needed || r.peer == peer || r.peer == AnySource
		}
	}
	for r := range mb.claimed {
		needed = needed || r.from == peer
	}
	for _, ims := range mb.inflight {
		for _, im := range ims {
			needed = needed || im.from == peer
		}
	}
	if needed {
		mb.failLocked(&AbortError{Cause: perr})
	}
}

// needLostLocked fails the mailbox because an operation needs the lost
// peer, and returns the error.
func (mb *mailbox) needLostLocked(peer int) error {
	mb.failLocked(&AbortError{Cause: mb.lost[peer]})
	return mb.err
}
