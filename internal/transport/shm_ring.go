package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/internal/kernel"
)

// ringOut is this rank's producing end of the ring to one peer on its host.
type ringOut struct {
	peer int
	d    []byte        // the ring's records
	ctl  ringWords     // the ring's control words
	cons consumerWords // the peer's consumer block
	// lock is held while a whole message is written, so records of
	// different messages never interleave.
	lock sendLock

	// Guarded by lock.
	tail     uint64 // bytes published
	seenHead uint64 // the consumer's head when last read
}

// ringIn is this rank's consuming end of the ring from one peer. Only the
// goroutine holding the endpoint's poller role touches it.
type ringIn struct {
	peer int
	d    []byte
	ctl  ringWords
	next uint64   // bytes consumed
	cur  inStream // the message being taken in, if any
	bye  bool     // the goodbye was consumed: nothing follows
	dead bool     // the ring broke its protocol and is ignored
	// pid is the peer's process; single says this rank can read its
	// memory (and told it so through the ring's single word).
	pid    int
	single bool
}

// inStream is a message taken in record by record; it mirrors what a TCP
// reader does for a message arriving in fragments.
type inStream struct {
	active     bool
	h          Header
	total, got int
	what       arrival
	r          *recvOp      // arriveDirect: the receive being written into
	im         *inflightMsg // arriveQueue: the in-flight entry a receive may claim
	data       []byte       // arriveQueue: payload so far
	pooled     bool         // data is from getBig
}

// sendLock is a lock whose waits can be cancelled: an atomic flag when
// uncontended, a channel to wait on when not.
type sendLock struct {
	held    atomic.Int32
	waiters atomic.Int32
	wake    chan struct{} // capacity 1: the lock was released
}

func newSendLock() sendLock { return sendLock{wake: make(chan struct{}, 1)} }

// lock takes the lock, or returns ctx's error, or errRingFailed once
// failed is closed (a nil failed never is).
func (l *sendLock) lock(ctx context.Context, failed <-chan struct{}) error {
	if l.held.CompareAndSwap(0, 1) {
		return nil
	}
	l.waiters.Add(1)
	defer func() {
		l.waiters.Add(-1)
		if l.held.Load() == 0 && l.waiters.Load() > 0 {
			l.signal() // pass on a wake this waiter may have taken
		}
	}()
	for {
		if l.held.CompareAndSwap(0, 1) {
			return nil
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-failed:
			return errRingFailed
		}
	}
}

func (l *sendLock) unlock() {
	l.held.Store(0)
	if l.waiters.Load() > 0 {
		l.signal()
	}
}

func (l *sendLock) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Errors of ring waits; the endpoint turns them into its public errors.
var (
	errRingFailed     = errors.New("endpoint failed")
	errRingPeerClosed = errors.New("peer closed")
	errRingPeerLost   = errors.New("peer lost")
)

// ---- producing ----

// writeMessage appends one message to o; the caller holds o.lock. It
// returns how many records it published: more than zero with an error
// means the message is half-written.
func (e *shmEndpoint) writeMessage(ctx context.Context, o *ringOut, h *Header, payload []byte) (published int, err error) {
	total, done := len(payload), 0
	for {
		n := min(e.chunk, total-done)
		off, err := e.reserve(ctx, o, recordSpan(n), true)
		if err != nil {
			return published, err
		}
		writeRecord(o, off, h, total, published, payload[done:done+n])
		published++
		done += n
		if done == total {
			return published, nil
		}
	}
}

// writeRecord writes and publishes the record at off holding piece, the
// next of a total-byte message of which published records are out.
func writeRecord(o *ringOut, off int, h *Header, total, published int, piece []byte) {
	n := len(piece)
	if published == 0 {
		putFirstHeader(o.d, off, h, total, n)
	} else {
		putShortHeader(o.d, off, recMore, n)
	}
	// Past the ring's first lap the consumer has read these lines: a
	// copy that bypasses this core's cache does not wait for them, but
	// leaves the consumer to fetch the record from memory, which costs a
	// small message more than it saves; from sharedCopyMin on, the bypass
	// wins (ping-pong measured both ways).
	dst := o.d[off+recHeader : off+recHeader+n]
	if n < sharedCopyMin {
		copy(dst, piece)
	} else {
		kernel.CopyShared(dst, piece)
	}
	o.publish(off, recordSpan(n))
}

// sharedCopyMin is the smallest record whose payload writeMessage
// copies with kernel.CopyShared.
const sharedCopyMin = 1024

// publish makes the record at off (span bytes) visible and wakes the
// consumer if it sleeps.
func (o *ringOut) publish(off, span int) {
	atomic.StoreUint64(recSeq(o.d, off), o.tail+1)
	o.tail += uint64(span)
	o.cons.wakePoller()
}

// reserve waits until a record of span bytes fits at the ring's tail
// (padding out the lap's end first if it does not fit there) and returns
// its offset. With failFast it gives up when the endpoint fails.
func (e *shmEndpoint) reserve(ctx context.Context, o *ringOut, span int, failFast bool) (int, error) {
	size := len(o.d)
	off := int(o.tail % uint64(size))
	if off+span > size {
		pad := size - off
		if err := e.waitRoom(ctx, o, pad, failFast); err != nil {
			return 0, err
		}
		putShortHeader(o.d, off, recPad, 0)
		atomic.StoreUint64(recSeq(o.d, off), o.tail+1)
		o.tail += uint64(pad)
		off = 0
	}
	return off, e.waitRoom(ctx, o, span, failFast)
}

// tryReserve is reserve without waiting: it reports false, having
// written at most the lap's padding, when the record does not fit yet.
func tryReserve(o *ringOut, span int) (int, bool) {
	size := len(o.d)
	off := int(o.tail % uint64(size))
	if off+span > size {
		pad := size - off
		if !o.room(pad) {
			return 0, false
		}
		putShortHeader(o.d, off, recPad, 0)
		atomic.StoreUint64(recSeq(o.d, off), o.tail+1)
		o.tail += uint64(pad)
		off = 0
	}
	return off, o.room(span)
}

// room reports whether span more bytes fit, reading the consumer's head
// again if they did not at the last reading.
func (o *ringOut) room(span int) bool {
	if o.fits(span) {
		return true
	}
	o.seenHead = atomic.LoadUint64(o.ctl.head)
	return o.fits(span)
}

func (o *ringOut) fits(span int) bool {
	return o.tail+uint64(span)-o.seenHead <= uint64(len(o.d))
}

// waitRoom waits until span more bytes fit in the ring; the caller holds
// o.lock.
func (e *shmEndpoint) waitRoom(ctx context.Context, o *ringOut, span int, failFast bool) error {
	if o.fits(span) {
		return nil
	}
	o.seenHead = atomic.LoadUint64(o.ctl.head)
	if o.fits(span) {
		return nil
	}
	head, err := e.waitHead(ctx, o, o.tail+uint64(span)-uint64(len(o.d)), failFast)
	o.seenHead = max(o.seenHead, head)
	return err
}

// waitHead waits until the consumer has freed the ring up to byte
// position need, and returns the head it saw: spinning, then yielding,
// then asking the consumer's drainer to empty the ring and sleeping until
// the consumer frees room. With failFast it gives up when the endpoint
// fails. It does not need o.lock.
func (e *shmEndpoint) waitHead(ctx context.Context, o *ringOut, need uint64, failFast bool) (uint64, error) {
	head := atomic.LoadUint64(o.ctl.head)
	if head >= need {
		return head, nil
	}
	failed, lost := e.mb.failedCh, e.mb.lostChan(o.peer)
	if !failFast {
		failed = nil
	}
	bo := Backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	for {
		if err := roomGone(ctx, o, failed, lost); err != nil {
			return head, err
		}
		switch bo.Next() {
		case PhaseYield:
			bo.YieldCPU()
		case PhaseSleep:
			// Nobody may be polling the ring: wake the peer's drainer.
			e.sleepForRoom(ctx, o, maxSleep, failed, lost, o.cons.wakeDrainer, func() bool {
				return atomic.LoadUint64(o.ctl.head) >= need
			})
		}
		if head = atomic.LoadUint64(o.ctl.head); head >= need {
			return head, nil
		}
	}
}

// roomGone says why a producer of o can wait no longer: ctx's error,
// the endpoint's failure (failed may be nil: never), the peer's loss or
// its close; nil if it can.
func roomGone(ctx context.Context, o *ringOut, failed, lost <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-failed:
		return errRingFailed
	case <-lost:
		return errRingPeerLost
	default:
	}
	if atomic.LoadUint32(o.cons.closed) != 0 {
		return errRingPeerClosed
	}
	return nil
}

// sleepForRoom sleeps, for at most d, until the consumer of o frees room
// (it wakes the ring's space word while the waiting word is set), unless
// room reports some already; ask is called first, to ask the consumer's
// drainer for room.
func (e *shmEndpoint) sleepForRoom(ctx context.Context, o *ringOut, d time.Duration, failed, lost <-chan struct{}, ask func(), room func() bool) {
	atomic.StoreUint32(o.ctl.waiting, waitRoom)
	v := atomic.LoadUint32(o.ctl.space)
	ask()
	if !room() && atomic.LoadUint32(o.cons.closed) == 0 {
		e.sleep(o.ctl.space, v, d, ctx.Done(), failed, lost)
	}
	atomic.StoreUint32(o.ctl.waiting, 0)
}

// waitCopied waits until the peer has copied a single-copy message out
// of this process (freed the ring up to need), as waitHead waits for room,
// with two differences. Past its spin phase it drains this rank's own
// rings when no receive does: lazily (a receive of this rank may be about
// to be posted for what is there), and fully once it sleeps if the send
// is a plain Send (blocking), whose caller may be one of two ranks that
// both send before they receive. And it summons the peer's drainer only
// after singlePatience, sleeping until then (woken when the peer frees
// the record), when it also drains its own rings fully.
func (e *shmEndpoint) waitCopied(ctx context.Context, o *ringOut, need uint64, blocking bool) error {
	failed, lost := e.mb.failedCh, e.mb.lostChan(o.peer)
	start := time.Now()
	bo := Backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	for {
		if atomic.LoadUint64(o.ctl.head) >= need {
			return nil
		}
		if err := roomGone(ctx, o, failed, lost); err != nil {
			// The peer may have copied the message, freed the record and
			// closed since head was loaded: the send succeeded then.
			if err == errRingPeerClosed && atomic.LoadUint64(o.ctl.head) >= need {
				return nil
			}
			return err
		}
		phase := bo.Next()
		if phase != PhaseSpin && len(e.ins) > 0 && e.role.CompareAndSwap(0, 1) {
			e.singleLazy = phase == PhaseYield || (!blocking && time.Since(start) < singlePatience)
			e.drain()
			e.role.Store(0)
			e.afterRole()
		}
		switch phase {
		case PhaseYield:
			bo.YieldCPU()
		case PhaseSleep:
			w, d := uint32(waitCopy), singlePatience-time.Since(start)
			if d <= 0 {
				w, d = waitRoom, maxSleep
				o.cons.wakeDrainer()
			}
			atomic.StoreUint32(o.ctl.waiting, w)
			v := atomic.LoadUint32(o.ctl.space)
			if atomic.LoadUint64(o.ctl.head) < need && atomic.LoadUint32(o.cons.closed) == 0 {
				e.sleep(o.ctl.space, v, d, ctx.Done(), failed, lost)
			}
			atomic.StoreUint32(o.ctl.waiting, 0)
		}
	}
}

// ---- consuming ----

// drainBudget bounds the records taken from one ring per pass, so that
// one busy ring does not starve the others.
const drainBudget = 64

// drain moves what the inbound rings hold into the mailbox: matched
// messages straight into their receives' buffers, others into the
// unexpected queue. The caller holds the poller role. It returns the
// number of records consumed (and stopped streams released).
func (e *shmEndpoint) drain() int { return e.drainUntil(nil) }

// drainUntil is drain for a poller waiting for the receive until: once
// until is done it starts no new message, so that a message nobody waits
// for yet stays in its ring for a receive about to be posted (it would
// otherwise be copied into a fresh buffer and again out of it).
func (e *shmEndpoint) drainUntil(until *recvOp) int {
	failed := e.mb.hasFailed.Load()
	n := 0
	for _, in := range e.ins {
		if failed && in.cur.active && in.cur.what != arriveDrop {
			e.dropStream(in)
		}
		n += e.drainRing(in, until)
	}
	return n
}

func (e *shmEndpoint) drainRing(in *ringIn, until *recvOp) int {
	if in.dead || in.bye {
		if e.mb.nEarly.Load() > 0 {
			e.lostDrained(in) // nothing more comes: settle a pending loss
		}
		return 0
	}
	n := 0
	if in.cur.what == arriveDirect && in.cur.r.stop.Load() {
		e.unclaim(in)
		n++
	}
	size := len(in.d)
	for range drainBudget {
		off := int(in.next % uint64(size))
		if atomic.LoadUint64(recSeq(in.d, off)) != in.next+1 {
			break
		}
		kind, ln := recKind(in.d, off)
		if (kind == recFirst || kind == recSingle) && until != nil && isClosed(until.done) {
			break
		}
		span := recordSpan(ln)
		if kind == recPad {
			span = size - off
		}
		var err error
		switch {
		case off+span > size:
			err = fmt.Errorf("%d-byte record at offset %d overruns the %d-byte ring", ln, off, size)
		case kind == recFirst:
			err = e.onFirst(in, off, ln)
		case kind == recMore:
			err = e.onMore(in, off, ln)
		case kind == recSingle:
			var leave bool
			if leave, err = e.onSingle(in, off, ln); leave {
				return n
			}
		case kind == recGoodbye && !in.cur.active:
			in.bye = true
		case kind == recGoodbye:
			err = fmt.Errorf("rank %d closed its endpoint in the middle of a %d-byte message", in.peer, in.cur.total)
		case kind == recPad:
		default:
			err = fmt.Errorf("unknown record kind %d", kind)
		}
		if err != nil {
			e.ringBroken(in, err)
			return n
		}
		e.freeRecord(in, span)
		n++
		if in.bye {
			e.mb.peerGoneInOrder(in.peer)
			break
		}
	}
	if e.mb.nEarly.Load() > 0 && !in.bye && atomic.LoadUint64(recSeq(in.d, int(in.next%uint64(size)))) != in.next+1 {
		// The ring is empty: a loss of its peer that waited for what
		// the peer wrote before it went applies now.
		e.lostDrained(in)
	}
	return n
}

// lostDrained applies an early loss of in's peer (see
// mailbox.peerLost), if there is one, now that its ring holds nothing
// more: a message left half-taken-in is lost with it.
func (e *shmEndpoint) lostDrained(in *ringIn) {
	if !e.mb.hasEarlyLost(in.peer) {
		return
	}
	mid := in.cur.active && in.cur.what != arriveDrop
	e.mb.applyEarlyLost(in.peer, mid)
	if mid {
		e.dropStream(in)
	}
}

// ready reports whether a pass of drain would find something to do.
func (e *shmEndpoint) ready() bool {
	if e.mb.nEarly.Load() > 0 {
		return true // a loss waits for a pass over the rings
	}
	for _, in := range e.ins {
		if in.dead || in.bye {
			continue
		}
		if atomic.LoadUint64(recSeq(in.d, int(in.next%uint64(len(in.d))))) == in.next+1 {
			return true
		}
		if in.cur.what == arriveDirect && in.cur.r.stop.Load() {
			return true
		}
	}
	return false
}

// streaming reports whether some message is partly taken in.
func (e *shmEndpoint) streaming() bool {
	for _, in := range e.ins {
		if in.cur.active {
			return true
		}
	}
	return false
}

// producerWaiting reports whether a peer waits for room in a ring to this
// rank.
func (e *shmEndpoint) producerWaiting() bool {
	for _, in := range e.ins {
		if atomic.LoadUint32(in.ctl.waiting) == waitRoom {
			return true
		}
	}
	return false
}

func (e *shmEndpoint) onFirst(in *ringIn, off, ln int) error {
	if in.cur.active {
		return fmt.Errorf("a message starts inside a %d-byte message", in.cur.total)
	}
	h, total64 := getFirstHeader(in.d, off)
	if total64 > maxMessage || total64 > uint64(maxInt) || uint64(ln) > total64 || (ln == 0 && total64 != 0) || ln > len(in.d) {
		return fmt.Errorf("bad first record: %d of %d bytes", ln, total64)
	}
	total := int(total64)
	piece := in.d[off+recHeader : off+recHeader+ln]
	if ln == total {
		r, what := e.mb.arrive(in.peer, h, total)
		switch what {
		case arriveDirect:
			r.put(0, piece)
			e.mb.complete(r)
			e.completed++
		case arriveQueue:
			e.mb.deliver(in.peer, h, append([]byte(nil), piece...))
		}
		return nil
	}
	r, im, what := e.mb.arriveStream(in.peer, h, total, nil)
	in.cur = inStream{active: true, h: h, total: total, what: what, r: r, im: im}
	if what == arriveQueue {
		if in.cur.pooled = total <= pooledMax; in.cur.pooled {
			in.cur.data = getBig(total)[:0] // recycled: see pooledMax
		} else {
			in.cur.data = make([]byte, 0, min(total, readChunk))
		}
	}
	e.onPiece(in, piece)
	return nil
}

// onSingle takes a single-copy record: it copies the message out of the
// sender's memory into the receive posted for it, or into a buffer of its
// own for the unexpected queue, before the record is freed (which
// releases the sender). While e.singleLazy is set it does neither for a
// message nobody receives yet and reports leave: the record stays at the
// ring's head, as a receive is likely about to be posted for it.
func (e *shmEndpoint) onSingle(in *ringIn, off, ln int) (leave bool, err error) {
	if in.cur.active {
		return false, fmt.Errorf("a message starts inside a %d-byte message", in.cur.total)
	}
	if !in.single {
		return false, fmt.Errorf("a single-copy record, but this rank cannot read rank %d's memory", in.peer)
	}
	h, total64 := getFirstHeader(in.d, off)
	if ln != 8 || total64 > maxMessage || total64 > uint64(maxInt) {
		return false, fmt.Errorf("bad single-copy record: %d-byte payload for a %d-byte message", ln, total64)
	}
	total := int(total64)
	addr := binary.LittleEndian.Uint64(in.d[off+recHeader:])
	fail := func(err error) error {
		return fmt.Errorf("copying rank %d's %d-byte message out of its memory: %v", in.peer, total, err)
	}
	r, what := e.mb.arrive(in.peer, h, total)
	if what == arriveQueue && e.singleLazy {
		return true, nil
	}
	switch what {
	case arriveDirect:
		// Marked as streaming, so that a failed copy releases r.
		in.cur = inStream{active: true, h: h, total: total, what: arriveDirect, r: r}
		if err := readPeerInto(in.pid, addr, r); err != nil {
			return false, fail(err)
		}
		in.cur = inStream{}
		e.singleIn.Add(1) // before the receive returns
		e.mb.complete(r)
		e.completed++
	case arriveQueue:
		data, err := readPeerBuffer(in.pid, addr, total)
		if err != nil {
			return false, fail(err)
		}
		e.singleIn.Add(1)
		e.mb.deliverPooled(in.peer, h, data)
	}
	return false, nil
}

// readPeerInto copies r's message out of process pid: into r.buf, or,
// for a receive with a sink, through a buffer of its own in
// sinkStageBytes pieces, each handed to the sink while it is in cache.
func readPeerInto(pid int, addr uint64, r *recvOp) error {
	if r.sink == nil {
		return readPeer(pid, addr, r.buf)
	}
	n := len(r.buf)
	stage := getBig(min(n, sinkStageBytes))
	defer putBig(stage)
	for off := 0; off < n; off += len(stage) {
		p := stage[:min(len(stage), n-off)]
		if err := readPeer(pid, addr+uint64(off), p); err != nil {
			return err
		}
		r.sink(off, p)
	}
	return nil
}

// sinkStageBytes is the piece in which a single-copy message for a
// receive with a sink is copied and handed on: small enough to stay in
// a core's L2 cache while the sink reads it.
const sinkStageBytes = 256 << 10

// readPeerBuffer copies a total-byte message out of process pid into a
// buffer of its own: a recycled one up to 256 MiB, else one that grows as
// the copy succeeds, so that a bogus length costs at most twice what the
// peer has mapped, not what it announced.
func readPeerBuffer(pid int, addr uint64, total int) ([]byte, error) {
	if total <= 256<<20 {
		data := getBig(total)
		if err := readPeer(pid, addr, data); err != nil {
			putBig(data)
			return nil, err
		}
		return data, nil
	}
	data := make([]byte, 16<<20)
	done := 0
	for {
		if err := readPeer(pid, addr+uint64(done), data[done:]); err != nil {
			return nil, err
		}
		done = len(data)
		if done == total {
			return data, nil
		}
		grown := make([]byte, min(2*done, total))
		copy(grown, data)
		data = grown
	}
}

func (e *shmEndpoint) onMore(in *ringIn, off, ln int) error {
	s := &in.cur
	if !s.active || ln == 0 || ln > s.total-s.got {
		return fmt.Errorf("bad continuation record of %d bytes (message active %v, %d of %d bytes)", ln, s.active, s.got, s.total)
	}
	e.onPiece(in, in.d[off+recHeader:off+recHeader+ln])
	return nil
}

// onPiece takes the next piece of the current message: into the claimed
// receive's buffer, the in-flight buffer (switching to a receive that
// claimed it meanwhile), or nowhere.
func (e *shmEndpoint) onPiece(in *ringIn, piece []byte) {
	s := &in.cur
	switch s.what {
	case arriveDirect:
		if s.r.stop.Load() {
			e.unclaim(in)
		}
	case arriveQueue:
		if s.im != nil && s.im.handoff.Load() {
			r := e.mb.takeHandoff(s.im)
			r.put(0, s.data)
			if s.pooled {
				putBig(s.data)
			}
			s.r, s.im, s.data, s.what, s.pooled = r, nil, nil, arriveDirect, false
		}
	}
	switch s.what {
	case arriveDirect:
		s.r.put(s.got, piece)
	case arriveQueue:
		s.data = appendGrow(s.data, piece, s.total)
	}
	s.got += len(piece)
	if s.got < s.total {
		return
	}
	switch s.what {
	case arriveDirect:
		e.mb.complete(s.r)
		e.completed++
	case arriveQueue:
		switch {
		case s.im != nil:
			e.mb.deliverInflight(s.im, s.data, s.pooled)
		case s.pooled:
			e.mb.deliverPooled(in.peer, s.h, s.data)
		default:
			e.mb.deliver(in.peer, s.h, s.data)
		}
	}
	in.cur = inStream{}
}

// appendGrow appends p to data, growing it in bounded steps (never past
// total) as pieces arrive, not by what a header announced.
func appendGrow(data, p []byte, total int) []byte {
	if cap(data)-len(data) < len(p) {
		grown := make([]byte, len(data), min(max(2*cap(data), len(data)+len(p)), total))
		copy(grown, data)
		data = grown
	}
	return append(data, p...)
}

// unclaim gives back the buffer of a claimed receive whose stop is set
// (its ctx ended, or the endpoint failed): what arrived so far moves to a
// fresh buffer and the rest of the message is queued as if it had arrived
// unexpected (or dropped if the endpoint failed).
func (e *shmEndpoint) unclaim(in *ringIn) {
	s := &in.cur
	r := s.r
	if isClosed(e.mb.failedCh) || r.sink != nil {
		// What a sink took cannot be given back: the rest is dropped,
		// and the receive's caller fails (its ctx ended).
		s.what = arriveDrop
	} else {
		s.data = append(make([]byte, 0, max(s.got, min(s.total, readChunk))), r.buf[:s.got]...)
		s.what, s.pooled = arriveQueue, false
	}
	s.r = nil
	e.mb.abandon(r)
}

// dropStream ends the current message of a ring after the endpoint
// failed: its receive or in-flight entry is released, the rest dropped.
func (e *shmEndpoint) dropStream(in *ringIn) {
	s := &in.cur
	switch s.what {
	case arriveDirect:
		e.mb.abandon(s.r)
	case arriveQueue:
		if s.im != nil {
			e.mb.dropInflight(s.im)
		}
	}
	s.r, s.im, s.data, s.what = nil, nil, nil, arriveDrop
}

// ringBroken handles a ring that broke the record protocol, which only a
// corrupted or hostile peer does, or whose peer's process is gone while
// this rank copied a message out of it: the peer counts as lost, as a TCP
// peer sending a malformed frame does. Its connection is given a moment
// first (see TCP.peerVanished): a peer that aborted and exited sent its
// abort there, and that is the cause to report, not its disappearance.
func (e *shmEndpoint) ringBroken(in *ringIn, err error) {
	in.dead = true
	e.vanished(in.peer, fmt.Errorf("%w: shared-memory ring: %v", ErrPeerLost, err))
	if in.cur.active && in.cur.what != arriveDrop {
		e.dropStream(in)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
