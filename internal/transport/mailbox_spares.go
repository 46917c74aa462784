package transport

// spares are emptied queues, lists and quiet receives kept for reuse: a
// loop of small operations makes and drops a queue or two per message.
// Each list is bounded (maxFreeQueues, maxFreeRecvs). Guarded by
// mailbox.mu.
type spares struct {
	freeKQ    []*keyQueue
	freeSQ    []*seqQueue
	freeRecvs []*recvOp
	freeLists [][]*inflightMsg // emptied lists of inflight
}

// maxFreeQueues bounds each list of queues kept for reuse.
const maxFreeQueues = 64

// maxFreeRecvs bounds the quiet receives kept for reuse.
const maxFreeRecvs = 64

// newKeyQueueLocked returns an empty queue, a reused one if any (its
// slices emptied by slices.Delete and removeItem, which zero what they
// drop).
func (s *spares) newKeyQueueLocked() *keyQueue {
	if n := len(s.freeKQ); n > 0 {
		kq := s.freeKQ[n-1]
		s.freeKQ[n-1] = nil
		s.freeKQ = s.freeKQ[:n-1]
		return kq
	}
	return &keyQueue{}
}

// keepKeyQueue keeps an emptied queue for reuse, if there is room.
func (s *spares) keepKeyQueue(kq *keyQueue) {
	if len(s.freeKQ) < maxFreeQueues {
		s.freeKQ = append(s.freeKQ, kq)
	}
}

func (s *spares) newSeqQueueLocked() *seqQueue {
	if n := len(s.freeSQ); n > 0 {
		sq := s.freeSQ[n-1]
		s.freeSQ[n-1] = nil
		s.freeSQ = s.freeSQ[:n-1]
		return sq
	}
	return &seqQueue{}
}

// keepSeqQueue is keepKeyQueue for the Seq index.
func (s *spares) keepSeqQueue(sq *seqQueue) {
	if len(s.freeSQ) < maxFreeQueues {
		s.freeSQ = append(s.freeSQ, sq)
	}
}

// newRecvLocked returns a receive, quiet (from the free list) or not.
func (s *spares) newRecvLocked(quiet bool) *recvOp {
	if !quiet {
		return &recvOp{done: make(chan struct{})}
	}
	if n := len(s.freeRecvs); n > 0 {
		r := s.freeRecvs[n-1]
		s.freeRecvs[n-1] = nil
		s.freeRecvs = s.freeRecvs[:n-1]
		return r
	}
	return &recvOp{quiet: true}
}

// keepRecv keeps a reset quiet receive for reuse, if there is room.
func (s *spares) keepRecv(r *recvOp) {
	if len(s.freeRecvs) < maxFreeRecvs {
		s.freeRecvs = append(s.freeRecvs, r)
	}
}

// takeList returns an emptied inflight list to append to, or nil.
func (s *spares) takeList() []*inflightMsg {
	if n := len(s.freeLists); n > 0 {
		list := s.freeLists[n-1]
		s.freeLists[n-1] = nil
		s.freeLists = s.freeLists[:n-1]
		return list
	}
	return nil
}

// keepList keeps an emptied inflight list (its backing array) for reuse,
// if it has one and there is room.
func (s *spares) keepList(list []*inflightMsg) {
	if cap(list) > 0 && len(s.freeLists) < maxFreeQueues {
		s.freeLists = append(s.freeLists, list[:0])
	}
}
