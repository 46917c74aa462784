package transport

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// The mailbox matches arriving messages to posted receives; both endpoint
// implementations share it. Messages match on (Comm, Seq, Tag) and sender;
// per key, receives are served in posting order and messages from one
// sender in arrival order. A receive posted before its message registers
// its buffer so the message is written straight into it (arrive/claim); a
// message that arrives first is queued with its own buffer and copied at
// receive time.

type msgKey struct{ comm, seq, tag uint64 }

type seqKey struct{ comm, seq uint64 }

func keyOf(h *Header) msgKey { return msgKey{h.Comm, h.Seq, h.Tag} }

type recvState uint8

const (
	recvPosted  recvState = iota // queued in the mailbox, waiting for a message
	recvClaimed                  // a message is being written into buf
	recvDone                     // result set and done closed
)

// recvOp is one posted receive.
type recvOp struct {
	peer int // sender rank or AnySource
	h    Header
	buf  []byte
	// done is closed once state is recvDone. A quiet receive (TCP.recvMode)
	// has none until its owner must block (mailbox.doneChan), and then one
	// of capacity 1 that completion sends a token to instead, which the
	// owner alone takes: the channel is recycled with the receive, as a
	// channel per receive was an allocation per small operation.
	done chan struct{}
	// finished is set once state is recvDone, after from, n and err.
	finished atomic.Bool
	// quiet: the receive is TCP.recvMode's own, recycled once done
	// (mailbox.recycle) unless its channel was made.
	quiet bool
	// upTo: the message may be shorter than buf (RecvUpTo); its signature
	// must match h.Sig in all but Count.
	upTo bool
	// sink, if set, takes the message's bytes instead of buf (which then
	// only gives the length): whoever would copy bytes at offset off of
	// the message into buf calls sink(off, p) instead, in order of off,
	// each call before the next piece is taken in (see put).
	sink func(off int, p []byte)

	// stop asks whoever writes into buf (a claimed receive) to give the
	// buffer back: the receive's ctx ended or the mailbox failed.
	stop atomic.Bool
	// wake, if set, makes the writer of a claimed receive look at stop
	// now, also when it is blocked waiting for the peer's next bytes
	// (which, from a peer behind a dead link, never come): a connection's
	// reader interrupts its socket read. Set with the claim, under
	// mailbox.mu.
	wake func()

	// Guarded by mailbox.mu.
	state recvState
	from  int
	err   error
	// n is the message's length, set when a message is matched to the
	// receive (fit cuts buf to it).
	n int
}

// inflightMsg is a message whose payload a connection's reader is
// collecting into a fresh buffer because no receive was posted when it
// started to arrive. A matching receive posted meanwhile claims it (handoff):
// the reader moves what it has into the receive's buffer and reads the rest
// straight there, so a receive posted a little late still avoids most of
// the copy.
type inflightMsg struct {
	from    int
	h       Header
	n       int
	handoff atomic.Bool // r is set; the reader should switch to r.buf
	r       *recvOp     // guarded by mailbox.mu
	wake    func()      // the reader's (recvOp.wake), for the receive that claims it
}

// Recycled message records: a loop of small operations over TCP queues a
// message or two per operation.
var (
	messages     = sync.Pool{New: func() any { return new(message) }}
	inflightMsgs = sync.Pool{New: func() any { return new(inflightMsg) }}
)

// message is a fully arrived message nobody has received yet.
type message struct {
	from   int
	h      Header
	data   []byte
	pooled bool // data came from getBig and goes back once copied out
}

// keyQueue holds the receives and the messages of one key.
type keyQueue struct {
	posted  []*recvOp
	arrived []*message
}

// seqQueue indexes the same receives and messages by (Comm, Seq) so that a
// signature mismatch is seen even when tags differ.
type seqQueue struct {
	posted  []*recvOp
	arrived []*message
}

// errRecvAbandoned finishes a claimed receive whose ctx ended while its
// message was being read; its Recv returns ctx.Err().
var errRecvAbandoned = errors.New("receive abandoned")

// arrival says what to do with the payload of an arriving message.
type arrival uint8

const (
	arriveQueue  arrival = iota // no receive waits: keep it in a fresh buffer, then deliver
	arriveDirect                // write it into the claimed receive's buffer, then complete
	arriveDrop                  // discard it (consumed by a failed receive, or mailbox failed)
)

type mailbox struct {
	rank, size int
	failedCh   chan struct{} // closed when err is first set
	// hasFailed is set just before failedCh is closed: polling loops read
	// it on every pass, which a channel select costs several times more
	// for (17% of a 2-rank 8-byte all-reduce's time went to that select).
	hasFailed atomic.Bool

	mu     sync.Mutex // protects following
	err    error      // set once aborted or closed; every later op fails with it
	closed bool       // closed locally: later ops fail with ErrClosed
	byKey  map[msgKey]*keyQueue
	bySeq  map[seqKey]*seqQueue // Seq != 0 only
	// Emptied queues kept for reuse: a loop of small operations makes
	// and drops a queue or two per message. So are quiet receives.
	freeKQ    []*keyQueue
	freeSQ    []*seqQueue
	freeRecvs []*recvOp
	freeLists [][]*inflightMsg // emptied lists of inflight
	claimed   map[*recvOp]struct{}
	inflight  map[msgKey][]*inflightMsg // arriving into fresh buffers (TCP)
	gone      []bool                    // peer said goodbye
	nGone     int
	lastGone  int // the peer whose goodbye came last
	// inOrder marks peers whose messages travel apart from their goodbye
	// (shared-memory rings beside a TCP connection): their goodbye counts
	// only when it arrives in order with the messages (peerGoneInOrder);
	// one announced out of band (peerGone) is remembered in early. Nil
	// when unused.
	inOrder []bool
	early   []bool
	// lost holds, per peer, why its connection ended without a goodbye
	// (a *PeerError wrapping ErrPeerLost): a loss only for operations
	// that still need that peer (see peerLost). lostCh[peer] is closed
	// once lost[peer] is set. earlyLost is a loss of an inOrder peer
	// announced out of band, waiting for the peer's ring to be drained;
	// nEarly counts them (read without mu as a quick check).
	lost      []error
	lostCh    []chan struct{}
	nLost     int
	earlyLost []error
	nEarly    atomic.Int32
	// wakeRings, if set, asks whoever drains the rings of inOrder peers
	// to look at them now (an early loss waits for them).
	wakeRings func()

	// empty is set while byKey and inflight are empty (updated under mu):
	// a quick, lock-free "nothing is waiting here" for quietFor.
	empty atomic.Bool
}

func newMailbox(rank, size int) *mailbox {
	mb := &mailbox{
		rank:     rank,
		size:     size,
		failedCh: make(chan struct{}),
		byKey:    make(map[msgKey]*keyQueue),
		bySeq:    make(map[seqKey]*seqQueue),
		claimed:  make(map[*recvOp]struct{}),
		inflight: make(map[msgKey][]*inflightMsg),
		gone:     make([]bool, size),
		lost:     make([]error, size),
		lostCh:   make([]chan struct{}, size),
	}
	for p := range mb.lostCh {
		mb.lostCh[p] = make(chan struct{})
	}
	mb.empty.Store(true)
	return mb
}

// noteSizeLocked updates empty after byKey or inflight changed.
func (mb *mailbox) noteSizeLocked() {
	mb.empty.Store(len(mb.byKey) == 0 && len(mb.inflight) == 0)
}

// opErrLocked is the error every new operation fails with, or nil.
func (mb *mailbox) opErrLocked() error {
	if mb.closed {
		return ErrClosed
	}
	return mb.err
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
	if mb.err != nil {
		return false
	}
	mb.err = err
	mb.hasFailed.Store(true)
	close(mb.failedCh)
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

// markDone tells r's owner that r is done, with mailbox.mu held (which
// recycle takes too).
func (r *recvOp) markDone() {
	if r.done != nil {
		if r.quiet {
			select {
			case r.done <- struct{}{}:
			default:
			}
		} else {
			close(r.done)
		}
	}
	r.finished.Store(true)
}

// isDone reports whether r is done (its result is set).
func (r *recvOp) isDone() bool { return r.finished.Load() }

// closedChan is the done channel of a quiet receive that was done before
// its owner asked for one.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

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

// maxFreeRecvs bounds the quiet receives kept for reuse.
const maxFreeRecvs = 64

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
	if len(mb.freeRecvs) < maxFreeRecvs {
		mb.freeRecvs = append(mb.freeRecvs, r)
	}
}

// newRecvLocked returns a receive, quiet (from the free list) or not.
func (mb *mailbox) newRecvLocked(quiet bool) *recvOp {
	if !quiet {
		return &recvOp{done: make(chan struct{})}
	}
	if n := len(mb.freeRecvs); n > 0 {
		r := mb.freeRecvs[n-1]
		mb.freeRecvs[n-1] = nil
		mb.freeRecvs = mb.freeRecvs[:n-1]
		return r
	}
	return &recvOp{quiet: true}
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

// put writes p, the bytes at offset off of r's message: into r.buf, or
// to r.sink. p may be reused once put returns.
func (r *recvOp) put(off int, p []byte) {
	if r.sink != nil {
		r.sink(off, p)
		return
	}
	copy(r.buf[off:], p)
}

// fit records that a message of n bytes, which passed checkMatch, is
// matched to r: buf is cut to the message, so whoever writes the message
// into r.buf writes exactly r.buf.
func (r *recvOp) fit(n int) {
	r.buf = r.buf[:n]
	r.n = n
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

// askStop asks the writer of a claimed receive to give its buffer back,
// at once (wake) where it can be blocked. With mailbox.mu held.
func (r *recvOp) askStop() {
	r.stop.Store(true)
	if r.wake != nil {
		r.wake()
	}
}

// result is the outcome of a receive whose done channel is closed, for a
// Recv with context ctx.
func (r *recvOp) result(ctx context.Context) (int, error) {
	if r.err == errRecvAbandoned {
		return -1, ctx.Err()
	}
	return r.from, r.err
}

// checkMatch applies the checks every match makes: signature, then
// length. With upTo (RecvUpTo) the counts in the signatures may differ
// and the message may be shorter than the buffer, not longer.
func checkMatch(from int, got *Header, gotLen int, want *Header, wantLen int, upTo bool) error {
	gs, ws := got.Sig, want.Sig
	if upTo {
		gs.Count, ws.Count = 0, 0
	}
	if gs != ws {
		return &MismatchError{Peer: from, Seq: want.Seq, Local: want.Sig, Remote: got.Sig}
	}
	if gotLen != wantLen && !(upTo && gotLen < wantLen) {
		return &LengthError{Peer: from, Got: gotLen, Want: wantLen}
	}
	return nil
}

// handoffLocked finds a message of the key now arriving into a fresh
// buffer that a new receive from peer (of n bytes, header h) may claim:
// the next one from its sender, wanted by no earlier receive, and passing
// the signature and length checks (one that fails them is left to fail at
// delivery).
func (mb *mailbox) handoffLocked(key msgKey, peer int, h *Header, n int, upTo bool) *inflightMsg {
	kq := mb.byKey[key]
	for _, im := range mb.inflight[key] {
		if im.r != nil || (peer != AnySource && im.from != peer) || checkMatch(im.from, &im.h, im.n, h, n, upTo) != nil {
			continue
		}
		if kq != nil && slices.ContainsFunc(kq.posted, func(r *recvOp) bool {
			return r.peer == AnySource || r.peer == im.from
		}) {
			continue
		}
		return im
	}
	return nil
}

// takeInflightLocked unregisters im and returns the receive that claimed
// it, if any.
func (mb *mailbox) takeInflightLocked(im *inflightMsg) *recvOp {
	key := keyOf(&im.h)
	list := removeItem(mb.inflight[key], im)
	if len(list) == 0 {
		delete(mb.inflight, key)
		mb.noteSizeLocked()
		if cap(list) > 0 && len(mb.freeLists) < maxFreeQueues {
			mb.freeLists = append(mb.freeLists, list[:0])
		}
	} else {
		mb.inflight[key] = list
	}
	return im.r
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
	key := keyOf(&h)
	list := mb.inflight[key]
	if list == nil {
		if n := len(mb.freeLists); n > 0 {
			list = mb.freeLists[n-1]
			mb.freeLists[n-1] = nil
			mb.freeLists = mb.freeLists[:n-1]
		}
	}
	mb.inflight[key] = append(list, im)
	mb.noteSizeLocked()
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

func (mb *mailbox) postLocked(r *recvOp) {
	key := keyOf(&r.h)
	kq := mb.byKey[key]
	if kq == nil {
		kq = mb.newKeyQueueLocked()
		mb.byKey[key] = kq
		mb.noteSizeLocked()
	}
	kq.posted = append(kq.posted, r)
	if r.h.Seq != 0 {
		sk := seqKey{r.h.Comm, r.h.Seq}
		sq := mb.bySeq[sk]
		if sq == nil {
			sq = mb.newSeqQueueLocked()
			mb.bySeq[sk] = sq
		}
		sq.posted = append(sq.posted, r)
	}
}

func (mb *mailbox) unpostLocked(r *recvOp) {
	key := keyOf(&r.h)
	if kq := mb.byKey[key]; kq != nil {
		kq.posted = removeItem(kq.posted, r)
		mb.dropKeyIfEmpty(key, kq)
	}
	if r.h.Seq != 0 {
		sk := seqKey{r.h.Comm, r.h.Seq}
		if sq := mb.bySeq[sk]; sq != nil {
			sq.posted = removeItem(sq.posted, r)
			mb.dropSeqIfEmpty(sk, sq)
		}
	}
}

func (mb *mailbox) unqueueSeq(m *message) {
	sk := seqKey{m.h.Comm, m.h.Seq}
	if sq := mb.bySeq[sk]; sq != nil {
		sq.arrived = removeItem(sq.arrived, m)
		mb.dropSeqIfEmpty(sk, sq)
	}
}

// dropKeyIfEmpty removes kq from the index once it holds nothing and
// keeps it for reuse: the caller must not touch kq afterwards.
func (mb *mailbox) dropKeyIfEmpty(key msgKey, kq *keyQueue) {
	if len(kq.posted) == 0 && len(kq.arrived) == 0 {
		delete(mb.byKey, key)
		mb.noteSizeLocked()
		if len(mb.freeKQ) < maxFreeQueues {
			mb.freeKQ = append(mb.freeKQ, kq)
		}
	}
}

// dropSeqIfEmpty is dropKeyIfEmpty for the Seq index.
func (mb *mailbox) dropSeqIfEmpty(sk seqKey, sq *seqQueue) {
	if len(sq.posted) == 0 && len(sq.arrived) == 0 {
		delete(mb.bySeq, sk)
		if len(mb.freeSQ) < maxFreeQueues {
			mb.freeSQ = append(mb.freeSQ, sq)
		}
	}
}

// maxFreeQueues bounds each list of queues kept for reuse.
const maxFreeQueues = 64

// newKeyQueueLocked returns an empty queue, a reused one if any (its
// slices emptied by slices.Delete and removeItem, which zero what they
// drop).
func (mb *mailbox) newKeyQueueLocked() *keyQueue {
	if n := len(mb.freeKQ); n > 0 {
		kq := mb.freeKQ[n-1]
		mb.freeKQ[n-1] = nil
		mb.freeKQ = mb.freeKQ[:n-1]
		return kq
	}
	return &keyQueue{}
}

func (mb *mailbox) newSeqQueueLocked() *seqQueue {
	if n := len(mb.freeSQ); n > 0 {
		sq := mb.freeSQ[n-1]
		mb.freeSQ[n-1] = nil
		mb.freeSQ = mb.freeSQ[:n-1]
		return sq
	}
	return &seqQueue{}
}

// removeItem deletes the first occurrence of x, keeping order.
func removeItem[T comparable](s []T, x T) []T {
	if i := slices.Index(s, x); i >= 0 {
		var zero T
		copy(s[i:], s[i+1:])
		s[len(s)-1] = zero
		return s[:len(s)-1]
	}
	return s
}

// takeArrived removes and returns the first queued message from peer (any
// sender for AnySource).
func (kq *keyQueue) takeArrived(peer int) *message {
	for i, m := range kq.arrived {
		if peer == AnySource || m.from == peer {
			kq.arrived = slices.Delete(kq.arrived, i, i+1)
			return m
		}
	}
	return nil
}

// takePosted removes and returns the first receive that accepts a message
// from sender.
func (kq *keyQueue) takePosted(from int) *recvOp {
	for i, r := range kq.posted {
		if r.peer == AnySource || r.peer == from {
			kq.posted = slices.Delete(kq.posted, i, i+1)
			return r
		}
	}
	return nil
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
		key := keyOf(&h)
		kq := mb.byKey[key]
		if kq == nil {
			kq = mb.newKeyQueueLocked()
			mb.byKey[key] = kq
			mb.noteSizeLocked()
		}
		kq.arrived = append(kq.arrived, m)
		if h.Seq != 0 {
			sk := seqKey{h.Comm, h.Seq}
			sq := mb.bySeq[sk]
			if sq == nil {
				sq = mb.newSeqQueueLocked()
				mb.bySeq[sk] = sq
			}
			sq.arrived = append(sq.arrived, m)
		}
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
	if mb.inOrder != nil && mb.inOrder[peer] {
		mb.early[peer] = true
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
	if mb.inOrder == nil {
		mb.inOrder = make([]bool, mb.size)
		mb.early = make([]bool, mb.size)
		mb.earlyLost = make([]error, mb.size)
	}
	mb.inOrder[peer] = on
	if !on && mb.early[peer] {
		mb.early[peer] = false
		mb.peerGoneLocked(peer)
	}
	if !on && mb.earlyLost[peer] != nil {
		perr := mb.earlyLost[peer]
		mb.earlyLost[peer] = nil
		mb.nEarly.Add(-1)
		if mb.err == nil && !mb.gone[peer] {
			mb.lostLocked(peer, perr)
		}
	}
}

func (mb *mailbox) peerGoneLocked(peer int) {
	if mb.err != nil || mb.gone[peer] {
		return
	}
	mb.gone[peer] = true
	mb.nGone++
	mb.lastGone = peer
	allGone := mb.nGone == mb.size-1
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

// Peers lost. A connection that ends without a goodbye (the peer's
// process was killed or exited without Close, or the network broke) is a
// loss only for operations that still need something from that peer:
// messages it sent before stay receivable, and receives from other peers
// go on. The first operation that does need it (a receive from it with
// nothing queued, one already waiting or half-written, an AnySource
// receive, a send to it) fails the whole mailbox with the loss, as
// before: the operation's caller aborts the world and tells the others.

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
	if mb.inOrder != nil && mb.inOrder[peer] {
		if mb.earlyLost[peer] == nil {
			mb.earlyLost[peer] = perr
			mb.nEarly.Add(1)
			if mb.wakeRings != nil {
				mb.wakeRings()
			}
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
	perr := mb.earlyLost[peer]
	if perr == nil {
		return
	}
	mb.earlyLost[peer] = nil
	mb.nEarly.Add(-1)
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
	mb.lost[peer] = perr
	mb.nLost++
	close(mb.lostCh[peer])
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

// lostFor returns a lost peer a receive from peer (or AnySource) needs,
// or -1.
func (mb *mailbox) lostFor(peer int) int {
	if mb.nLost == 0 {
		return -1
	}
	if peer != AnySource {
		if mb.lost[peer] != nil {
			return peer
		}
		return -1
	}
	for p, err := range mb.lost {
		if err != nil {
			return p
		}
	}
	return -1
}

// needLostLocked fails the mailbox because an operation needs the lost
// peer, and returns the error.
func (mb *mailbox) needLostLocked(peer int) error {
	mb.failLocked(&AbortError{Cause: mb.lost[peer]})
	return mb.err
}

// lostChan is closed once peer is lost (see peerLost).
func (mb *mailbox) lostChan(peer int) <-chan struct{} { return mb.lostCh[peer] }
