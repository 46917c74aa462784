package transport

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// Tests of the mailbox's parts on their own; mailbox_test.go tests them
// composed.

// TestFailureFirstWins: the first error set is the one every operation
// sees, hasFailed and failedCh say so, and a close makes it ErrClosed.
func TestFailureFirstWins(t *testing.T) {
	var f failure
	f.init()
	if f.opErrLocked() != nil || f.hasFailed.Load() || isClosed(f.failedCh) {
		t.Fatal("a new failure has failed")
	}
	first, second := errors.New("first"), errors.New("second")
	if !f.setLocked(first) {
		t.Fatal("the first set did not set")
	}
	if f.setLocked(second) {
		t.Fatal("a second set set")
	}
	if f.opErrLocked() != first || !f.hasFailed.Load() || !isClosed(f.failedCh) {
		t.Fatalf("after two sets: %v, hasFailed %v, failedCh closed %v; want the first", f.opErrLocked(), f.hasFailed.Load(), isClosed(f.failedCh))
	}
	f.closed = true
	if f.opErrLocked() != ErrClosed {
		t.Fatalf("closed: %v, want ErrClosed", f.opErrLocked())
	}
}

// TestSparesReuse: each free list gives back what it kept, last first,
// keeps at most its bound, and a non-quiet receive is always new.
func TestSparesReuse(t *testing.T) {
	var s spares
	kqs := make([]*keyQueue, maxFreeQueues+3)
	for i := range kqs {
		kqs[i] = s.newKeyQueueLocked()
		if slices.Contains(kqs[:i], kqs[i]) {
			t.Fatal("a new key queue was given out twice")
		}
	}
	for _, kq := range kqs {
		s.keepKeyQueue(kq)
	}
	if len(s.freeKQ) != maxFreeQueues {
		t.Fatalf("kept %d key queues, want the bound %d", len(s.freeKQ), maxFreeQueues)
	}
	if got := s.newKeyQueueLocked(); got != kqs[maxFreeQueues-1] {
		t.Fatal("the reused key queue is not the last kept")
	}

	sq := s.newSeqQueueLocked()
	s.keepSeqQueue(sq)
	if s.newSeqQueueLocked() != sq || s.newSeqQueueLocked() == sq {
		t.Fatal("a seq queue was not reused exactly once")
	}

	loud := s.newRecvLocked(false)
	if loud.quiet || loud.done == nil {
		t.Fatal("a non-quiet receive without its channel")
	}
	q := s.newRecvLocked(true)
	if !q.quiet {
		t.Fatal("a quiet receive is not quiet")
	}
	for range maxFreeRecvs + 1 {
		s.keepRecv(q)
	}
	if len(s.freeRecvs) != maxFreeRecvs {
		t.Fatalf("kept %d receives, want the bound %d", len(s.freeRecvs), maxFreeRecvs)
	}
	if s.newRecvLocked(true) != q || s.newRecvLocked(false) == q {
		t.Fatal("receives: a quiet one not reused, or a non-quiet one reused")
	}

	if s.takeList() != nil {
		t.Fatal("a list from no spares")
	}
	s.keepList(nil) // no backing array: not kept
	list := append(make([]*inflightMsg, 0, 4), &inflightMsg{})
	s.keepList(list)
	got := s.takeList()
	if len(got) != 0 || cap(got) != 4 || s.takeList() != nil {
		t.Fatalf("took a list of %d/%d, want the kept one emptied, once", len(got), cap(got))
	}
}

// TestLivenessMatchesModel drives peerLiveness with random goodbyes,
// losses and early losses and checks what it answers against a naive
// model: lostFor names the lowest lost peer for AnySource, the peer itself
// if lost, else -1; lost channels are closed exactly for lost peers.
func TestLivenessMatchesModel(t *testing.T) {
	const size = 5
	for trial := range 200 {
		rng := rand.New(rand.NewPCG(uint64(trial), 2))
		var l peerLiveness
		l.init(size)
		gone, lost, early := map[int]bool{}, map[int]bool{}, map[int]bool{}
		last := -1
		for range 20 {
			p := rng.IntN(size)
			switch rng.IntN(4) {
			case 0:
				if got, want := l.markGoneLocked(p), !gone[p]; got != want {
					t.Fatalf("trial %d: markGone(%d) = %v, want %v", trial, p, got, want)
				}
				if !gone[p] {
					last = p
				}
				gone[p] = true
			case 1:
				if !lost[p] {
					l.markLostLocked(p, errors.New("lost"))
					lost[p] = true
				}
			case 2:
				l.setInOrderLocked(p, size, true)
				if got, want := l.holdEarlyLostLocked(p, errors.New("early")), !early[p]; got != want {
					t.Fatalf("trial %d: holdEarlyLost(%d) = %v, want %v", trial, p, got, want)
				}
				early[p] = true
			case 3:
				if l.earlyLost == nil {
					continue
				}
				if got := l.takeEarlyLostLocked(p) != nil; got != early[p] {
					t.Fatalf("trial %d: takeEarlyLost(%d) = %v, want %v", trial, p, got, early[p])
				}
				delete(early, p)
			}
			if int(l.nEarly.Load()) != len(early) {
				t.Fatalf("trial %d: nEarly %d, want %d", trial, l.nEarly.Load(), len(early))
			}
			if l.nGone != len(gone) || (len(gone) > 0 && l.lastGone != last) || l.allGoneLocked(size) != (len(gone) == size-1) {
				t.Fatalf("trial %d: nGone %d lastGone %d, want %d and %d", trial, l.nGone, l.lastGone, len(gone), last)
			}
			wantAny := -1
			for q := range size {
				want := -1
				if lost[q] {
					want = q
					if wantAny < 0 {
						wantAny = q
					}
				}
				if got := l.lostFor(q); got != want {
					t.Fatalf("trial %d: lostFor(%d) = %d, want %d", trial, q, got, want)
				}
				if isClosed(l.lostChan(q)) != lost[q] {
					t.Fatalf("trial %d: peer %d's lost channel closed %v, lost %v", trial, q, !lost[q], lost[q])
				}
			}
			if got := l.lostFor(AnySource); got != wantAny {
				t.Fatalf("trial %d: lostFor(AnySource) = %d, want %d", trial, got, wantAny)
			}
		}
	}
}

// TestMatchIndexMatchesModel drives a matchIndex with random posts,
// withdrawals, queued messages and takes over a few keys and sequence
// numbers, and checks it against a naive model, a list per key and per
// (Comm, Seq): posted receives and queued messages in order, takes
// choosing the first one that accepts, emptied queues leaving the index
// (and empty set when nothing is left).
func TestMatchIndexMatchesModel(t *testing.T) {
	type model struct {
		posted  map[msgKey][]*recvOp
		arrived map[msgKey][]*message
	}
	for trial := range 200 {
		rng := rand.New(rand.NewPCG(uint64(trial), 3))
		var ix matchIndex
		ix.init()
		m := model{posted: map[msgKey][]*recvOp{}, arrived: map[msgKey][]*message{}}
		header := func() Header {
			return Header{Comm: 1, Seq: uint64(rng.IntN(3)), Tag: uint64(rng.IntN(2)), Sig: sig(8)}
		}
		for range 60 {
			switch rng.IntN(5) {
			case 0: // post
				r := &recvOp{peer: []int{1, 2, AnySource}[rng.IntN(3)], h: header()}
				ix.postLocked(r)
				k := keyOf(&r.h)
				m.posted[k] = append(m.posted[k], r)
			case 1: // withdraw a posted receive
				for k, rs := range m.posted {
					r := rs[rng.IntN(len(rs))]
					ix.unpostLocked(r)
					m.posted[k] = removeItem(rs, r)
					if len(m.posted[k]) == 0 {
						delete(m.posted, k)
					}
					break
				}
			case 2: // queue a message
				msg := &message{from: 1 + rng.IntN(2), h: header()}
				ix.queueLocked(msg)
				k := keyOf(&msg.h)
				m.arrived[k] = append(m.arrived[k], msg)
			case 3: // a receive takes a queued message
				h := header()
				k, peer := keyOf(&h), []int{1, 2, AnySource}[rng.IntN(3)]
				var want *message
				for _, msg := range m.arrived[k] {
					if peer == AnySource || msg.from == peer {
						want = msg
						break
					}
				}
				var got *message
				if kq := ix.byKey[k]; kq != nil {
					if got = kq.takeArrived(peer); got != nil {
						ix.dropKeyIfEmpty(k, kq)
						if h.Seq != 0 {
							ix.unqueueSeq(got)
						}
					}
				}
				if got != want {
					t.Fatalf("trial %d: took message %p, want %p", trial, got, want)
				}
				if want != nil {
					m.arrived[k] = removeItem(m.arrived[k], want)
					if len(m.arrived[k]) == 0 {
						delete(m.arrived, k)
					}
				}
			case 4: // a message takes a posted receive
				h := header()
				k, from := keyOf(&h), 1+rng.IntN(2)
				var want *recvOp
				for _, r := range m.posted[k] {
					if r.peer == AnySource || r.peer == from {
						want = r
						break
					}
				}
				var got *recvOp
				if kq := ix.byKey[k]; kq != nil {
					if got = kq.takePosted(from); got != nil {
						ix.dropKeyIfEmpty(k, kq)
						if h.Seq != 0 {
							sk := seqKey{h.Comm, h.Seq}
							sq := ix.bySeq[sk]
							sq.posted = removeItem(sq.posted, got)
							ix.dropSeqIfEmpty(sk, sq)
						}
					}
				}
				if got != want {
					t.Fatalf("trial %d: took receive %p, want %p", trial, got, want)
				}
				if want != nil {
					m.posted[k] = removeItem(m.posted[k], want)
					if len(m.posted[k]) == 0 {
						delete(m.posted, k)
					}
				}
			}
			checkIndex(t, trial, &ix, m.posted, m.arrived)
		}
	}
}

// checkIndex compares ix with the model's lists, by key and by (Comm, Seq).
func checkIndex(t *testing.T, trial int, ix *matchIndex, posted map[msgKey][]*recvOp, arrived map[msgKey][]*message) {
	t.Helper()
	keys := map[msgKey]bool{}
	seqPosted, seqArrived := map[seqKey][]*recvOp{}, map[seqKey][]*message{}
	for k, rs := range posted {
		keys[k] = true
		if k.seq != 0 {
			sk := seqKey{k.comm, k.seq}
			seqPosted[sk] = append(seqPosted[sk], rs...)
		}
	}
	for k, ms := range arrived {
		keys[k] = true
		if k.seq != 0 {
			sk := seqKey{k.comm, k.seq}
			seqArrived[sk] = append(seqArrived[sk], ms...)
		}
	}
	if len(ix.byKey) != len(keys) {
		t.Fatalf("trial %d: %d keys indexed, want %d (emptied queues must leave)", trial, len(ix.byKey), len(keys))
	}
	for k := range keys {
		kq := ix.byKey[k]
		if kq == nil || !slices.Equal(kq.posted, posted[k]) || !slices.Equal(kq.arrived, arrived[k]) {
			t.Fatalf("trial %d: key %v holds %v, want posted %v arrived %v", trial, k, kq, posted[k], arrived[k])
		}
	}
	if ix.empty.Load() != (len(keys) == 0) {
		t.Fatalf("trial %d: empty %v with %d keys", trial, ix.empty.Load(), len(keys))
	}
	seqs := len(seqPosted)
	for sk := range seqArrived {
		if _, ok := seqPosted[sk]; !ok {
			seqs++
		}
	}
	if len(ix.bySeq) != seqs {
		t.Fatalf("trial %d: %d sequence numbers indexed, want %d", trial, len(ix.bySeq), seqs)
	}
	for sk, sq := range ix.bySeq {
		// The Seq index keeps its own order across tags: compare as sets.
		if !sameItems(sq.posted, seqPosted[sk]) || !sameItems(sq.arrived, seqArrived[sk]) {
			t.Fatalf("trial %d: sequence %v holds %d posted %d arrived, want %d and %d", trial, sk, len(sq.posted), len(sq.arrived), len(seqPosted[sk]), len(seqArrived[sk]))
		}
	}
}

func sameItems[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
