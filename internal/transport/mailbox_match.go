package transport

import (
	"slices"
	"sync"
	"sync/atomic"
)

// The queues of the mailbox that match messages to receives (see
// mailbox.go).

type msgKey struct{ comm, seq, tag uint64 }

type seqKey struct{ comm, seq uint64 }

func keyOf(h *Header) msgKey { return msgKey{h.Comm, h.Seq, h.Tag} }

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

// matchIndex holds what waits to be matched: the posted receives and the
// queued messages by key, the same by (Comm, Seq) for signature checks,
// the receives a message is being written into, and the messages
// arriving into fresh buffers. Guarded by mailbox.mu but for empty.
type matchIndex struct {
	byKey    map[msgKey]*keyQueue
	bySeq    map[seqKey]*seqQueue // Seq != 0 only
	claimed  map[*recvOp]struct{}
	inflight map[msgKey][]*inflightMsg // arriving into fresh buffers (TCP)
	// empty is set while byKey and inflight are empty (updated under mu):
	// a quick, lock-free "nothing is waiting here" for quietFor.
	empty atomic.Bool
	spares
}

// init readies ix, empty.
func (ix *matchIndex) init() {
	ix.byKey = make(map[msgKey]*keyQueue)
	ix.bySeq = make(map[seqKey]*seqQueue)
	ix.claimed = make(map[*recvOp]struct{})
	ix.inflight = make(map[msgKey][]*inflightMsg)
	ix.empty.Store(true)
}

// noteSizeLocked updates empty after byKey or inflight changed.
func (ix *matchIndex) noteSizeLocked() {
	ix.empty.Store(len(ix.byKey) == 0 && len(ix.inflight) == 0)
}

// handoffLocked finds a message of the key now arriving into a fresh
// buffer that a new receive from peer (of n bytes, header h) may claim:
// the next one from its sender, wanted by no earlier receive, and passing
// the signature and length checks (one that fails them is left to fail at
// delivery).
func (ix *matchIndex) handoffLocked(key msgKey, peer int, h *Header, n int, upTo bool) *inflightMsg {
	kq := ix.byKey[key]
	for _, im := range ix.inflight[key] {
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
func (ix *matchIndex) takeInflightLocked(im *inflightMsg) *recvOp {
	key := keyOf(&im.h)
	list := removeItem(ix.inflight[key], im)
	if len(list) == 0 {
		delete(ix.inflight, key)
		ix.noteSizeLocked()
		ix.keepList(list)
	} else {
		ix.inflight[key] = list
	}
	return im.r
}

func (ix *matchIndex) postLocked(r *recvOp) {
	key := keyOf(&r.h)
	kq := ix.byKey[key]
	if kq == nil {
		kq = ix.newKeyQueueLocked()
		ix.byKey[key] = kq
		ix.noteSizeLocked()
	}
	kq.posted = append(kq.posted, r)
	if r.h.Seq != 0 {
		sk := seqKey{r.h.Comm, r.h.Seq}
		sq := ix.bySeq[sk]
		if sq == nil {
			sq = ix.newSeqQueueLocked()
			ix.bySeq[sk] = sq
		}
		sq.posted = append(sq.posted, r)
	}
}

func (ix *matchIndex) unpostLocked(r *recvOp) {
	key := keyOf(&r.h)
	if kq := ix.byKey[key]; kq != nil {
		kq.posted = removeItem(kq.posted, r)
		ix.dropKeyIfEmpty(key, kq)
	}
	if r.h.Seq != 0 {
		sk := seqKey{r.h.Comm, r.h.Seq}
		if sq := ix.bySeq[sk]; sq != nil {
			sq.posted = removeItem(sq.posted, r)
			ix.dropSeqIfEmpty(sk, sq)
		}
	}
}

func (ix *matchIndex) unqueueSeq(m *message) {
	sk := seqKey{m.h.Comm, m.h.Seq}
	if sq := ix.bySeq[sk]; sq != nil {
		sq.arrived = removeItem(sq.arrived, m)
		ix.dropSeqIfEmpty(sk, sq)
	}
}

// dropKeyIfEmpty removes kq from the index once it holds nothing and
// keeps it for reuse: the caller must not touch kq afterwards.
func (ix *matchIndex) dropKeyIfEmpty(key msgKey, kq *keyQueue) {
	if len(kq.posted) == 0 && len(kq.arrived) == 0 {
		delete(ix.byKey, key)
		ix.noteSizeLocked()
		ix.keepKeyQueue(kq)
	}
}

// dropSeqIfEmpty is dropKeyIfEmpty for the Seq index.
func (ix *matchIndex) dropSeqIfEmpty(sk seqKey, sq *seqQueue) {
	if len(sq.posted) == 0 && len(sq.arrived) == 0 {
		delete(ix.bySeq, sk)
		ix.keepSeqQueue(sq)
	}
}

// queueLocked queues m, which no posted receive takes, under its key and
// (Comm, Seq).
func (ix *matchIndex) queueLocked(m *message) {
	h := &m.h
	key := keyOf(h)
	kq := ix.byKey[key]
	if kq == nil {
		kq = ix.newKeyQueueLocked()
		ix.byKey[key] = kq
		ix.noteSizeLocked()
	}
	kq.arrived = append(kq.arrived, m)
	if h.Seq != 0 {
		sk := seqKey{h.Comm, h.Seq}
		sq := ix.bySeq[sk]
		if sq == nil {
			sq = ix.newSeqQueueLocked()
			ix.bySeq[sk] = sq
		}
		sq.arrived = append(sq.arrived, m)
	}
}

// addInflightLocked registers im, a message arriving into a fresh buffer
// that a later receive may claim.
func (ix *matchIndex) addInflightLocked(im *inflightMsg) {
	key := keyOf(&im.h)
	list := ix.inflight[key]
	if list == nil {
		list = ix.takeList()
	}
	ix.inflight[key] = append(list, im)
	ix.noteSizeLocked()
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
