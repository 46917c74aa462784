package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// shmEndpoint is the shared-memory half of a Hybrid endpoint: it owns the
// segment shared with the ranks of this host, the rings to and from each
// of them, the poller role (see recv), the drainer goroutine and the
// single-copy machinery (see recSingle). It has no connections of its
// own: it delivers into the mailbox of the TCP endpoint beside it, whose
// failure it obeys, and reports a peer that broke the ring protocol or
// was left with half a message through lost, which aborts that endpoint
// (and so this one) naming the peer.
//
// Its methods are safe for concurrent use; the Hybrid router calls send,
// startSend and recv only for peers it shares memory with (shares,
// polls), and close once, last.
type shmEndpoint struct {
	rank, size int
	mb         *mailbox                    // the TCP endpoint's
	lost       func(peer int, cause error) // the TCP endpoint's peerLost
	vanished   func(peer int, cause error) // the TCP endpoint's peerVanished

	seg   []byte
	path  string // the segment's file (removed once mapped): shared allocations are named after it
	opts  SHMOptions
	chunk int
	me    consumerWords // this rank's consumer block
	out   []*ringOut    // by world rank; nil for TCP peers
	outs  []*ringOut    // the non-nil ones
	in    []*ringIn     // by world rank
	ins   []*ringIn     // the non-nil ones
	// areas is set when every rank of the world is in this segment and
	// it has collective areas.
	areas *Areas
	// alone: no other rank of the segment lives in this process (see
	// sleep).
	alone bool

	// Single copy (see recSingle): sends of at least singleMin bytes
	// (0: never) to peers that can read this process's memory go as
	// their address; probe is the word peers test that on.
	singleMin int
	probe     *uint64
	singleIn  atomic.Int64 // messages this rank copied out of a peer's memory
	// singleLazy leaves single-copy records nobody receives yet in their
	// rings (see onSingle); guarded by the poller role.
	singleLazy bool
	// streams are the started ring sends not yet written (shm_stream.go).
	streams streams

	// The poller role: one goroutine at a time drains the inbound rings.
	role      atomic.Int32
	waiters   atomic.Int32  // receives wanting the role
	handoff   chan struct{} // a released role, for a waiting receive
	completed int           // receives completed by pollers; guarded by the role

	// mapMu is held shared by every operation that touches the mapping;
	// close takes it to unmap.
	mapMu    sync.RWMutex
	unmapped bool // guarded by mapMu
	// mapRefs counts close's reference to the mapping (1 until close) and
	// the sends startSend began and finish has not ended, which outlive
	// their hold on mapMu; the last reference unmaps.
	mapRefs atomic.Int64

	drainStop chan struct{} // closed to stop the drainer
	wg        sync.WaitGroup
}

// peerLink is how a shmEndpoint reports a peer lost to the endpoint that
// holds the connections (*TCP): at once (peerLost: a message interrupted
// here), or after the peer's connection has had a moment to deliver what
// the peer wrote before it went (peerVanished: its process is gone, or it
// broke the ring protocol).
type peerLink interface {
	peerLost(peer int, cause error)
	peerVanished(peer int, cause error)
}

// shares reports whether messages to peer move through this endpoint.
func (e *shmEndpoint) shares(peer int) bool { return e.outTo(peer) != nil }

// polls reports whether a receive from peer (or AnySource) polls the
// rings: some message for it may come through them.
func (e *shmEndpoint) polls(peer int) bool {
	if peer == AnySource {
		return len(e.ins) > 0
	}
	return e.in[peer] != nil
}

// sendsBuffered is Hybrid.SendsBuffered for a peer on this host.
func (e *shmEndpoint) sendsBuffered(peer, n int) bool {
	return e.shares(peer) && n <= e.opts.RingBytes/2 && (e.singleMin <= 0 || n < e.singleMin)
}

// send is Hybrid.Send to a peer on this host (shares(peer)); single
// false keeps it in the ring whatever its size (Hybrid.SendCopy).
func (e *shmEndpoint) send(ctx context.Context, peer int, h Header, payload []byte, single bool) error {
	o := e.out[peer]
	e.mapMu.RLock()
	defer e.mapMu.RUnlock()
	if err := e.sendChecks(ctx, peer, payload); err != nil {
		return err
	}
	if single && e.sendsSingle(o, len(payload)) {
		return e.sendSingle(ctx, o, &h, payload)
	}
	if e.streamable(peer, len(payload)) {
		// A receive of this rank polling meanwhile writes it, while this
		// goroutine waits instead of spinning beside it.
		e.mapRefs.Add(1)
		return e.startStream(o, &h, payload, 0)(ctx)
	}
	if err := o.lock.lock(ctx, e.mb.failedCh); err == errRingFailed {
		return e.mb.sendErr(peer)
	} else if err != nil {
		return err
	}
	published, err := e.writeMessage(ctx, o, &h, payload)
	o.lock.unlock()
	return e.sendResult(o.peer, published, err)
}

// sendChecks are the checks of a send to peer on this host before it
// touches the ring; the caller holds mapMu shared.
func (e *shmEndpoint) sendChecks(ctx context.Context, peer int, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A peer that said goodbye set its closed flag first (below), so the
	// mailbox only needs asking once it failed.
	if isClosed(e.mb.failedCh) {
		return e.mb.sendErr(peer)
	}
	if uint64(len(payload)) > maxMessage {
		return fmt.Errorf("comm: transport: message of %d bytes exceeds the limit %d", len(payload), uint64(maxMessage))
	}
	if e.unmapped {
		return ErrClosed
	}
	if atomic.LoadUint32(e.out[peer].cons.closed) != 0 {
		return &PeerError{Peer: peer, Err: ErrPeerClosed}
	}
	return nil
}

// sendSingle sends a message the peer copies straight out of payload.
func (e *shmEndpoint) sendSingle(ctx context.Context, o *ringOut, h *Header, payload []byte) error {
	return e.startSingle(ctx, o, h, payload, true)(ctx)
}

// startSingle publishes a single-copy record with payload's address and
// returns the wait until the peer has freed it, which the peer does after
// copying. payload must not move meanwhile: Go's heap does not move
// objects, and finish keeps it alive.
// A started (not blocking) send's caller receives before it finishes, so
// finish need not take in messages nobody receives yet.
func (e *shmEndpoint) startSingle(ctx context.Context, o *ringOut, h *Header, payload []byte, blocking bool) (finish func(context.Context) error) {
	if err := o.lock.lock(ctx, e.mb.failedCh); err == errRingFailed {
		err = e.mb.sendErr(o.peer)
		return sendDone(err)
	} else if err != nil {
		return sendDone(err)
	}
	span := recordSpan(8)
	off, err := e.reserve(ctx, o, span, true)
	if err != nil {
		o.lock.unlock()
		err = e.sendResult(o.peer, 0, err)
		return sendDone(err)
	}
	putFirstHeader(o.d, off, h, len(payload), 8)
	o.d[off+8] = recSingle
	binary.LittleEndian.PutUint64(o.d[off+recHeader:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(payload)))))
	o.publish(off, span)
	end := o.tail
	o.lock.unlock()
	return func(ctx context.Context) error {
		err := e.waitCopied(ctx, o, end, blocking)
		runtime.KeepAlive(payload)
		return e.sendResult(o.peer, 1, err)
	}
}

// sendDone is the finish of a send that ended when it started.
func sendDone(err error) func(context.Context) error {
	return func(context.Context) error { return err }
}

// sendsStartable is Hybrid.SendsStartable: whether a send of n bytes to
// peer goes by single copy, or through the ring as a stream (it does not
// fit in the ring's half at once, see sendsBuffered).
func (e *shmEndpoint) sendsStartable(peer, n int) bool {
	o := e.outTo(peer)
	return o != nil && (e.sendsSingle(o, n) || e.streamable(peer, n))
}

// streamable reports whether a send of n bytes to peer (on this host)
// would go as a stream: it does not fit in half the ring, the largest
// send that completes at once (sendsBuffered).
func (e *shmEndpoint) streamable(peer, n int) bool {
	return e.shares(peer) && n > e.opts.RingBytes/2
}

// sendsSingle reports whether a send of n bytes through o goes by single
// copy.
func (e *shmEndpoint) sendsSingle(o *ringOut, n int) bool {
	return e.singleMin > 0 && n >= e.singleMin && peerReads(o)
}

// peerReads reports whether the peer of o copies out of this process's
// memory. Right after set-up the peer may not have said yet: wait for it
// (briefly; it says as soon as it has mapped the segment).
func peerReads(o *ringOut) bool {
	v := atomic.LoadUint32(o.ctl.single)
	if v == singleUndecided {
		deadline := time.Now().Add(singleDecideWait)
		for v == singleUndecided && time.Now().Before(deadline) && atomic.LoadUint32(o.cons.closed) == 0 {
			runtime.Gosched()
			osYield()
			v = atomic.LoadUint32(o.ctl.single)
		}
	}
	return v == singleYes
}

func (e *shmEndpoint) outTo(peer int) *ringOut {
	if peer < 0 || peer >= e.size {
		return nil
	}
	return e.out[peer]
}

// startSend starts a send (see Hybrid.StartSend), by single copy (if
// single allows it) or as a stream through the ring, and returns its
// finish, or reports false, having done nothing, when the send is too
// small to start (or the segment is gone): the caller sends it at once
// instead.
func (e *shmEndpoint) startSend(ctx context.Context, peer int, h Header, payload []byte, single bool) (finish func(context.Context) error, started bool) {
	e.mapMu.RLock()
	defer e.mapMu.RUnlock()
	o := e.outTo(peer)
	if e.unmapped || o == nil {
		return nil, false
	}
	byCopy := single && e.sendsSingle(o, len(payload))
	if !byCopy && !e.streamable(peer, len(payload)) {
		return nil, false
	}
	if err := e.sendChecks(ctx, peer, payload); err != nil {
		return sendDone(err), true
	}
	// The send outlives this hold on mapMu (the caller receives
	// meanwhile, which takes it again): it keeps the mapping instead.
	e.mapRefs.Add(1)
	if !byCopy || e.streams.on(o) {
		// A single-copy send would wait for the ring's lock, which a
		// stream holds until this goroutine writes the stream's rest.
		return e.startStream(o, &h, payload, streamPatience), true
	}
	wait := e.startSingle(ctx, o, &h, payload, false)
	return func(ctx context.Context) error {
		defer e.unrefMap()
		return wait(ctx)
	}, true
}

// sendResult turns the outcome of writing a message into a ring (with
// published records of it out) into Send's error. A message cut short
// after its first record cannot be taken back: the connection to the peer
// is closed and the endpoint aborts, as with TCP.
func (e *shmEndpoint) sendResult(peer, published int, err error) error {
	switch {
	case err == nil:
		return nil
	case err == errRingPeerClosed:
		return &PeerError{Peer: peer, Err: ErrPeerClosed}
	case err == errRingFailed, err == errRingPeerLost:
		return e.mb.sendErr(peer)
	case published == 0:
		return err // ctx's
	}
	cause := fmt.Errorf("%w: send to rank %d interrupted mid-message; connection closed", ErrPeerLost, peer)
	e.lost(peer, cause)
	return fmt.Errorf("comm: transport: %w (send to rank %d interrupted mid-message; the connection was closed and the endpoint aborted)", err, peer)
}

// depart tells the peers on this host that this rank leaves, as an
// orderly Close does before the TCP goodbyes: senders to it stop waiting
// for room, and a goodbye record follows the last message in each ring
// to a peer, within closeWait. A peer whose ring takes no goodbye in
// time is reported lost, which (the mailbox being closed already) only
// closes its connection: it sees the connection end without a goodbye.
func (e *shmEndpoint) depart(closeWait time.Duration) {
	atomic.StoreUint32(e.me.closed, 1)
	for _, in := range e.ins {
		atomic.AddUint32(in.ctl.space, 1)
		futexWake(in.ctl.space)
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, o := range e.outs {
		wg.Go(func() {
			if !e.sayGoodbye(ctx, o) {
				e.lost(o.peer, fmt.Errorf("%w: no goodbye through shared memory within %v", ErrPeerLost, closeWait))
			}
		})
	}
	wg.Wait()
}

// close stops the drainer, waits for it and unmaps the segment (at once,
// or when the last started send finishes). The mailbox must have failed
// or closed first, so that no receive polls any more.
func (e *shmEndpoint) close() {
	close(e.drainStop) // the drainer selects on it
	e.wg.Wait()
	e.mapMu.Lock()
	e.unmapped = true
	e.unrefMap()
	if e.areas != nil && e.areas.closing != nil {
		e.areas.closing()
	}
	e.mapMu.Unlock()
}

// unrefMap drops a reference to the mapping: close's, or a started send's
// (see startSend). The last one unmaps the segment.
func (e *shmEndpoint) unrefMap() {
	if e.mapRefs.Add(-1) == 0 {
		unmapSegment(e.seg)
	}
}

// sayGoodbye writes the goodbye record after o's last message. It reports
// false if that could not be done in time (the peer must then learn it
// otherwise); a peer that closed needs none.
func (e *shmEndpoint) sayGoodbye(ctx context.Context, o *ringOut) bool {
	if o.lock.lock(ctx, nil) != nil {
		return false
	}
	defer o.lock.unlock()
	if atomic.LoadUint32(o.cons.closed) != 0 {
		return true
	}
	off, err := e.reserve(ctx, o, recHeader, false)
	if err == errRingPeerClosed {
		return true
	}
	if err != nil {
		return false
	}
	putShortHeader(o.d, off, recGoodbye, 0)
	o.publish(off, recHeader)
	return true
}
