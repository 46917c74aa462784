package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/gocomm/comm/core"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// TransportMode says how a Hybrid endpoint reaches its peers (core's, so
// that a backend's configuration can carry it parsed).
type TransportMode = core.TransportMode

// The transport modes.
const (
	TransportAuto = core.TransportAuto
	TransportTCP  = core.TransportTCP
	TransportSHM  = core.TransportSHM
)

// ParseTransportMode reads "auto" (or ""), "tcp" or "shm".
func ParseTransportMode(s string) (TransportMode, error) { return core.ParseTransportMode(s) }

// HybridOptions configures ConnectHybrid and ConnectSHM.
type HybridOptions struct {
	TCPOptions
	// HostID identifies this rank's host: ranks with equal HostIDs share
	// memory. "" is HostIdentity(). Tests set it to simulate several
	// hosts on one machine.
	HostID string
	// Transport picks the route to peers; see TransportMode.
	Transport TransportMode
	// SHM tunes the shared-memory rings.
	SHM SHMOptions

	mapHook func(rank int) error // tests: fails a rank's mapping of the segment
}

// Hybrid is an endpoint that reaches each peer on its own host through
// shared memory and every other peer over TCP, made by ConnectHybrid or
// ConnectSHM. It keeps a TCP connection to every peer even where data
// moves through memory: a peer that dies is noticed when its connection
// ends without a goodbye, and aborts travel over it, so failures read
// exactly as with TCP alone.
//
// Receives from peers on this host make progress on the receiving
// goroutine: it polls the rings itself (spinning briefly, then yielding,
// then sleeping on a futex a sender wakes), moving messages that other
// receives wait for, or that nobody waits for yet, to them or to the
// unexpected queue. A goroutine per endpoint drains rings that fill up
// while nobody receives, so a send never waits for its receive. Safe for
// concurrent use.
type Hybrid struct {
	rank, size int
	t          *TCP
	mb         *mailbox // t's
	hostOf     []int    // world rank -> host index (hosts numbered by lowest rank)
	closeWait  time.Duration

	// Shared memory; all nil or empty when no peer shares this host.
	seg    []byte
	opts   SHMOptions
	chunk  int
	me     consumerWords // this rank's consumer block
	out    []*ringOut    // by world rank; nil for TCP peers
	outs   []*ringOut    // the non-nil ones
	in     []*ringIn     // by world rank
	ins    []*ringIn     // the non-nil ones
	shmErr error         // why this host fell back to TCP, if it did

	// Single copy (see recSingle): sends of at least singleMin bytes
	// (0: never) to peers that can read this process's memory go as
	// their address; probe is the word peers test that on.
	singleMin int
	probe     *uint64
	singleIn  atomic.Int64 // messages this rank copied out of a peer's memory
	// singleLazy leaves single-copy records nobody receives yet in their
	// rings (see onSingle); guarded by the poller role.
	singleLazy bool

	// The poller role: one goroutine at a time drains the inbound rings.
	role      atomic.Int32
	waiters   atomic.Int32  // receives wanting the role
	handoff   chan struct{} // a released role, for a waiting receive
	completed int           // receives completed by pollers; guarded by the role

	// mapMu is held shared by every operation that touches the mapping;
	// Close takes it to unmap.
	mapMu    sync.RWMutex
	unmapped bool // guarded by mapMu
	// mapRefs counts Close's reference to the mapping (1 until Close) and
	// the sends StartSend began and finish has not ended, which outlive
	// their hold on mapMu; the last reference unmaps.
	mapRefs atomic.Int64

	drainStop chan struct{} // closed to stop the drainer
	wg        sync.WaitGroup

	mu       sync.Mutex // protects following
	closing  bool
	killed   bool
	closedCh chan struct{}
}

// HostTopology is implemented by endpoints that know which ranks share a
// host, for hierarchical collectives (inside each host, then between
// hosts).
type HostTopology interface {
	// HostOf returns the host index of a world rank: ranks with the same
	// index share a host; hosts are numbered in order of their lowest rank.
	HostOf(rank int) int
}

var (
	_ Endpoint     = (*Hybrid)(nil)
	_ HostTopology = (*Hybrid)(nil)
	_ SendStarter  = (*Hybrid)(nil)
)

// ConnectHybrid joins the world described by opts: it publishes this
// rank's host identity in store (under Prefix+"/host/<rank>"), connects
// the TCP mesh as ConnectTCP does, and then the ranks of each host set up
// a shared-memory segment together (the lowest rank creates it, every
// rank maps it, the creator removes the file once all have). If a rank of
// a host cannot map the segment, that host falls back to TCP (see
// SHMError). All ranks must call it concurrently.
func ConnectHybrid(ctx context.Context, store AddrStore, opts HybridOptions) (*Hybrid, error) {
	o, err := opts.TCPOptions.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Transport > TransportSHM {
		return nil, fmt.Errorf("comm: transport: unknown %v", opts.Transport)
	}
	if opts.Transport == TransportSHM && !shmSupported {
		return nil, fmt.Errorf("comm: transport: %w", errNoSHMHere)
	}
	if o.Size == 1 {
		t, err := ConnectTCP(ctx, store, opts.TCPOptions)
		if err != nil {
			return nil, err
		}
		return newHybrid(t, []int{0}, o.CloseTimeout), nil
	}
	if store == nil {
		return nil, fmt.Errorf("comm: transport: ConnectHybrid needs a store")
	}
	hostID := opts.HostID
	if hostID == "" {
		hostID = HostIdentity()
	}
	if err := store.Set(ctx, hostKey(&o, o.Rank), []byte(hostID)); err != nil {
		return nil, fmt.Errorf("comm: transport: rank %d: publishing host identity: %w", o.Rank, err)
	}
	t, err := ConnectTCP(ctx, store, opts.TCPOptions)
	if err != nil {
		return nil, err
	}
	// Every rank published its identity before connecting, so these are
	// all there.
	ids := make([]string, o.Size)
	for r := range ids {
		v, err := store.Get(ctx, hostKey(&o, r))
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("comm: transport: rank %d: reading the host identity of rank %d: %w", o.Rank, r, err)
		}
		ids[r] = string(v)
	}
	hostOf, local := groupHosts(ids, o.Rank)
	if len(local) > runtime.NumCPU() {
		// Ranks outnumber cores: a polling reader takes a core from a
		// rank with work to do.
		t.readSpin.Store(0)
	}
	e := newHybrid(t, hostOf, o.CloseTimeout)
	if opts.Transport == TransportSHM && len(local) != o.Size {
		t.Close()
		return nil, fmt.Errorf("comm: transport: rank %d: shared memory needs every rank on this host (%q), but only ranks %v are", o.Rank, hostID, local)
	}
	if len(local) < 2 || opts.Transport == TransportTCP || !shmSupported {
		return e, nil
	}
	for _, p := range local {
		if p != o.Rank {
			e.mb.setInOrder(p, true)
		}
	}
	fallback, err := e.setupSHM(ctx, store, &o, hostID, local, opts.SHM, opts.mapHook)
	if err == nil && fallback != nil && opts.Transport == TransportSHM {
		err = fmt.Errorf("comm: transport: rank %d: %w", o.Rank, fallback)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	if fallback != nil {
		e.shmErr = fallback
		for _, p := range local {
			if p != o.Rank {
				e.mb.setInOrder(p, false)
			}
		}
		return e, nil
	}
	e.wg.Add(1)
	go e.drainLoop()
	return e, nil
}

// ConnectSHM is ConnectHybrid with every rank on this host and every
// message through shared memory (Transport TransportSHM); the TCP mesh
// still carries goodbyes, aborts and the news of a dead peer.
func ConnectSHM(ctx context.Context, store AddrStore, opts HybridOptions) (*Hybrid, error) {
	opts.Transport = TransportSHM
	return ConnectHybrid(ctx, store, opts)
}

func newHybrid(t *TCP, hostOf []int, closeWait time.Duration) *Hybrid {
	return &Hybrid{
		rank: t.rank, size: t.size, t: t, mb: t.mb, hostOf: hostOf, closeWait: closeWait,
		out: make([]*ringOut, t.size), in: make([]*ringIn, t.size),
		handoff: make(chan struct{}, 1), drainStop: make(chan struct{}), closedCh: make(chan struct{}),
	}
}

func hostKey(o *TCPOptions, rank int) string { return fmt.Sprintf("%s/host/%d", o.Prefix, rank) }

// groupHosts numbers hosts by their lowest rank and lists the ranks on
// rank's host.
func groupHosts(ids []string, rank int) (hostOf []int, local []int) {
	index := map[string]int{}
	hostOf = make([]int, len(ids))
	for r, id := range ids {
		i, ok := index[id]
		if !ok {
			i = len(index)
			index[id] = i
		}
		hostOf[r] = i
	}
	for r := range ids {
		if hostOf[r] == hostOf[rank] {
			local = append(local, r)
		}
	}
	return hostOf, local
}

// Rank returns this endpoint's rank.
func (e *Hybrid) Rank() int { return e.rank }

// Size returns the world size.
func (e *Hybrid) Size() int { return e.size }

// HostOf returns the host index of a world rank: ranks with the same index
// share a host (hosts are numbered in order of their lowest rank).
func (e *Hybrid) HostOf(rank int) int { return e.hostOf[rank] }

// SharedMemory reports whether messages to peer move through shared
// memory (else TCP).
func (e *Hybrid) SharedMemory(peer int) bool {
	return peer >= 0 && peer < e.size && e.out[peer] != nil
}

// SendsBuffered reports whether a send of n bytes to peer completes
// without the peer's help: it fits in half the pair's ring, so its copy
// into shared memory runs at once (else the peer's drainer empties the
// ring into its mailbox, so it completes anyway, only later). The engine
// runs such sends inline instead of in a goroutine of their own, whose
// scheduling costs more than the copy on a busy host.
func (e *Hybrid) SendsBuffered(peer, n int) bool {
	return e.SharedMemory(peer) && n <= e.opts.RingBytes/2 && (e.singleMin <= 0 || n < e.singleMin)
}

// SHMError says why ranks on this host that could share memory use TCP
// instead (a rank could not map the segment), or is nil.
func (e *Hybrid) SHMError() error { return e.shmErr }

// Send transmits payload to peer. Through shared memory it copies the
// payload into the ring (in pieces for large messages, as the receiver
// frees room) and returns when the last piece is in; it never waits for
// the matching receive. If ctx ends while a message is partly written, the
// endpoint aborts as with TCP (the peer sees the connection lost). See
// Endpoint.Send.
func (e *Hybrid) Send(ctx context.Context, peer int, h Header, payload []byte) error {
	if err := checkPeer(e.rank, e.size, peer, false); err != nil {
		return err
	}
	o := e.out[peer]
	if o == nil {
		return e.t.Send(ctx, peer, h, payload)
	}
	e.mapMu.RLock()
	defer e.mapMu.RUnlock()
	if err := e.sendChecks(ctx, peer, payload); err != nil {
		return err
	}
	if e.SendsStartable(peer, len(payload)) {
		return e.sendSingle(ctx, o, &h, payload)
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
func (e *Hybrid) sendChecks(ctx context.Context, peer int, payload []byte) error {
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
func (e *Hybrid) sendSingle(ctx context.Context, o *ringOut, h *Header, payload []byte) error {
	return e.startSingle(ctx, o, h, payload, true)(ctx)
}

// startSingle publishes a single-copy record with payload's address and
// returns the wait until the peer has freed it, which the peer does after
// copying. payload must not move meanwhile: Go's heap does not move
// objects, and finish keeps it alive.
// A started (not blocking) send's caller receives before it finishes, so
// finish need not take in messages nobody receives yet.
func (e *Hybrid) startSingle(ctx context.Context, o *ringOut, h *Header, payload []byte, blocking bool) (finish func(context.Context) error) {
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

// SendsStartable reports whether a send of n bytes to peer goes by single
// copy, so that StartSend returns with the send in progress.
func (e *Hybrid) SendsStartable(peer, n int) bool {
	o := e.outTo(peer)
	return o != nil && e.singleMin > 0 && n >= e.singleMin && peerReads(o)
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

func (e *Hybrid) outTo(peer int) *ringOut {
	if peer < 0 || peer >= e.size {
		return nil
	}
	return e.out[peer]
}

// StartSend starts a send (see SendStarter): a single-copy send is
// published and finished by finish; any other send runs at once.
func (e *Hybrid) StartSend(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error) {
	e.mapMu.RLock()
	if e.unmapped || !e.SendsStartable(peer, len(payload)) {
		e.mapMu.RUnlock()
		err := e.Send(ctx, peer, h, payload)
		return sendDone(err)
	}
	if err := e.sendChecks(ctx, peer, payload); err != nil {
		e.mapMu.RUnlock()
		return sendDone(err)
	}
	// The send outlives this hold on mapMu (the caller receives
	// meanwhile, which takes it again): it keeps the mapping instead.
	e.mapRefs.Add(1)
	wait := e.startSingle(ctx, e.out[peer], &h, payload, false)
	e.mapMu.RUnlock()
	return func(ctx context.Context) error {
		defer e.unrefMap()
		return wait(ctx)
	}
}

// sendResult turns the outcome of writing a message into a ring (with
// published records of it out) into Send's error. A message cut short
// after its first record cannot be taken back: the connection to the peer
// is closed and the endpoint aborts, as with TCP.
func (e *Hybrid) sendResult(peer, published int, err error) error {
	switch {
	case err == nil:
		return nil
	case err == errRingPeerClosed:
		return &PeerError{Peer: peer, Err: ErrPeerClosed}
	case err == errRingFailed:
		return e.mb.sendErr(peer)
	case published == 0:
		return err // ctx's
	}
	cause := fmt.Errorf("%w: send to rank %d interrupted mid-message; connection closed", ErrPeerLost, peer)
	e.t.connLost(e.t.conns[peer], cause)
	return fmt.Errorf("comm: transport: %w (send to rank %d interrupted mid-message; the connection was closed and the endpoint aborted)", err, peer)
}

// Recv receives the next matching message into buf; see Endpoint.Recv.
// From a peer on this host (or from AnySource) the calling goroutine
// polls the rings itself unless another receive already does.
func (e *Hybrid) Recv(ctx context.Context, peer int, h Header, buf []byte) (int, error) {
	if err := checkPeer(e.rank, e.size, peer, true); err != nil {
		return -1, err
	}
	if (peer == AnySource && len(e.ins) == 0) || (peer != AnySource && e.in[peer] == nil) {
		return e.mb.recv(ctx, peer, h, buf)
	}
	e.mapMu.RLock()
	defer e.mapMu.RUnlock()
	if e.unmapped {
		return -1, e.mb.failed()
	}
	holding := false
	bo := backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	if len(buf) <= e.chunk && (peer != AnySource || len(e.ins) == e.size-1) && e.role.CompareAndSwap(0, 1) {
		holding = true
		if from, err, ok := e.recvDirect(ctx, peer, &h, buf, &bo); ok {
			e.role.Store(0)
			e.afterRole()
			return from, err
		}
	}
	r, from, err := e.mb.startRecv(ctx, peer, h, buf)
	if r == nil {
		if holding {
			e.role.Store(0)
			e.afterRole()
		}
		return from, err
	}
	return e.await(ctx, r, holding, &bo)
}

// recvDirect is the fast path of a receive of a message that fits in one
// record, run by the poller: while the mailbox has nothing for the
// receive's key, it polls the ring(s) the message can come from and takes
// a matching message at a ring's head straight into buf, with no mailbox
// work at all. It reports false, having consumed nothing for h, when the
// general path must take over: something else is at the ring's head, the
// mailbox is not quiet, ctx ended, the endpoint failed, or the wait got
// long enough to sleep.
func (e *Hybrid) recvDirect(ctx context.Context, peer int, h *Header, buf []byte, bo *backoff) (int, error, bool) {
	if !e.mb.quietFor(peer, h) {
		return -1, nil, false
	}
	var mine *ringIn
	if peer != AnySource {
		mine = e.in[peer]
	}
	key := keyOf(h)
	e.singleLazy = true
	// ctx.Err, not ctx.Done: a context may create its channel and timer
	// only once somebody waits on it, which the polling here never does.
	for polls := 0; ; polls++ {
		if isClosed(e.mb.failedCh) || (polls&63 == 0 && ctx.Err() != nil) {
			return -1, nil, false
		}
		progress := false
		for _, in := range e.ins {
			if mine != nil && in != mine {
				// Not the receive's peer: its records go to the mailbox.
				if e.drainRing(in, nil) > 0 {
					progress = true
				}
				continue
			}
			switch e.takeDirect(in, key, h, buf) {
			case takeDone:
				return in.peer, nil, true
			case takeOther:
				return -1, nil, false
			}
		}
		if progress {
			bo.reset()
			continue
		}
		switch bo.next() {
		case phaseYield:
			bo.yieldCPU()
		case phaseSleep:
			return -1, nil, false
		}
	}
}

type takeResult uint8

const (
	takeEmpty takeResult = iota // nothing at the ring's head
	takeDone                    // the message was taken into buf
	takeOther                   // something else is at the head
)

// takeDirect takes the message at in's head into buf if it is complete in
// one record, of h's key and signature, and len(buf) bytes long.
func (e *Hybrid) takeDirect(in *ringIn, key msgKey, h *Header, buf []byte) takeResult {
	if in.dead || in.bye || in.cur.active {
		return takeOther
	}
	size := len(in.d)
	for {
		off := int(in.next % uint64(size))
		if atomic.LoadUint64(recSeq(in.d, off)) != in.next+1 {
			return takeEmpty
		}
		kind, ln := recKind(in.d, off)
		if kind == recPad {
			e.freeRecord(in, size-off)
			continue
		}
		if kind != recFirst || ln != len(buf) {
			return takeOther
		}
		mh, total := getFirstHeader(in.d, off)
		if total != uint64(ln) || keyOf(&mh) != key || mh.Sig != h.Sig {
			return takeOther
		}
		copy(buf, in.d[off+recHeader:off+recHeader+ln])
		e.freeRecord(in, recordSpan(ln))
		return takeDone
	}
}

// freeRecord consumes the span bytes at in's head and wakes the producer
// if it waits for room.
func (e *Hybrid) freeRecord(in *ringIn, span int) {
	in.next += uint64(span)
	atomic.StoreUint64(in.ctl.head, in.next)
	if atomic.LoadUint32(in.ctl.waiting) != 0 {
		atomic.AddUint32(in.ctl.space, 1)
		futexWake(in.ctl.space)
	}
}

// await waits for a posted (or claimed) receive: as the poller when the
// role is free (or already held), else until the poller completes it or
// hands the role on. bo paces the polling (it may have started already).
func (e *Hybrid) await(ctx context.Context, r *recvOp, holding bool, bo *backoff) (int, error) {
	e.waiters.Add(1)
	ctxDone, failed := ctx.Done(), e.mb.failedCh
	cancelled, unposted := false, false
	for !isClosed(r.done) {
		if holding || e.role.CompareAndSwap(0, 1) {
			holding = false
			unposted = e.drive(ctxDone, r, &cancelled, bo)
			e.role.Store(0)
			e.afterRole()
			if unposted {
				break
			}
			continue
		}
		select {
		case <-r.done:
		case <-e.handoff:
		case <-ctxDone:
			ctxDone, cancelled = nil, true
			if e.mb.cancelRecv(r) {
				unposted = true
			} else {
				e.me.wakePoller() // the poller must give the buffer back
			}
		case <-failed:
			failed = nil // the next poller releases what failed
		}
		if unposted {
			break
		}
	}
	e.waiters.Add(-1)
	if e.role.Load() == 0 && e.waiters.Load() > 0 {
		e.passRole()
	}
	if unposted {
		return -1, ctx.Err()
	}
	return r.result(ctx)
}

// drive polls the rings as the poller until r is done. If ctx ends first
// it withdraws r and reports true when r was still unmatched.
func (e *Hybrid) drive(ctxDone <-chan struct{}, r *recvOp, cancelled *bool, bo *backoff) (unposted bool) {
	if *cancelled {
		ctxDone = nil
	}
	for {
		completed := e.completed
		// Until the wait gets long, single-copy messages nobody receives
		// yet wait in their rings for receives about to be posted.
		e.singleLazy = bo.phase != phaseSleep
		progress := e.drainUntil(r) > 0
		if isClosed(r.done) {
			return false
		}
		if e.completed != completed {
			// Another receive is done: let its goroutine (queued on this
			// thread) run now, so that it posts its next receive before
			// that message arrives and must be set aside.
			runtime.Gosched()
		}
		if isClosed(ctxDone) {
			ctxDone, *cancelled = nil, true
			if e.mb.cancelRecv(r) {
				return true
			}
			continue // the next pass gives back r's buffer
		}
		if progress {
			bo.reset()
			continue
		}
		switch bo.next() {
		case phaseYield:
			bo.yieldCPU()
		case phaseSleep:
			atomic.AddUint32(e.me.sleepers, 1)
			v := atomic.LoadUint32(e.me.wake)
			if !e.ready() && !isClosed(r.done) {
				sleepOn(e.me.wake, v, maxSleep, ctxDone, r.done, e.mb.failedCh)
			}
			atomic.AddUint32(e.me.sleepers, ^uint32(0))
		}
	}
}

// afterRole runs after the poller role is released: a waiting receive
// takes it over, and a producer still waiting for room gets the drainer.
func (e *Hybrid) afterRole() {
	if e.waiters.Load() > 0 {
		e.passRole()
	}
	if e.producerWaiting() {
		e.me.wakeDrainer()
	}
}

// passRole wakes one receive waiting for the role.
func (e *Hybrid) passRole() {
	select {
	case e.handoff <- struct{}{}:
	default:
	}
}

// drainLoop is the endpoint's drainer: it sleeps until a peer waiting for
// room in a ring asks for it, then, unless a receive already polls, drains
// the rings as the poller until they are empty or a receive wants the
// role. It sleeps on the drain word while the word still holds the value
// it read before its last session, so a request made since is never
// missed.
func (e *Hybrid) drainLoop() {
	defer e.wg.Done()
	seen := atomic.LoadUint32(e.me.drain)
	for {
		atomic.StoreUint32(e.me.bgAsleep, 1)
		sleepOn(e.me.drain, seen, maxSleep, e.drainStop, nil, nil)
		atomic.StoreUint32(e.me.bgAsleep, 0)
		if isClosed(e.drainStop) {
			return
		}
		seen = atomic.LoadUint32(e.me.drain)
		// A busy role needs no help: its holder drains, and asks again
		// when it lets go while a producer still waits (afterRole).
		if e.waiters.Load() == 0 && e.role.CompareAndSwap(0, 1) {
			e.singleLazy = false
			e.drainAll()
			e.role.Store(0)
			if e.waiters.Load() > 0 {
				e.passRole()
			}
		}
	}
}

// drainAll drains as the drainer: until nothing arrives for the length of
// a wait's spin and yield phases (it never sleeps holding the role), or a
// receive wants the role.
func (e *Hybrid) drainAll() {
	bo := backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	for e.waiters.Load() == 0 && !isClosed(e.drainStop) {
		if e.drain() > 0 {
			bo.reset()
			continue
		}
		if !e.streaming() && !e.producerWaiting() {
			return
		}
		switch bo.next() {
		case phaseYield:
			bo.yieldCPU()
		case phaseSleep:
			return
		}
	}
}

// Abort fails every pending and later operation and tells every peer; see
// TCP.Abort. After Close it does nothing.
func (e *Hybrid) Abort(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closing {
		e.t.Abort(err) // does not block
	}
}

// Kill makes the endpoint vanish as if its process crashed (see
// TCP.Kill): peers abort with ErrPeerLost naming this rank. Close must
// still be called. For fault-injection tests.
func (e *Hybrid) Kill() {
	e.mu.Lock()
	e.killed = true
	e.mu.Unlock()
	e.t.Kill()
}

// Close fails pending operations with ErrClosed, says goodbye to every
// peer (through each ring after its last message, and over TCP), waits as
// TCP.Close does, stops the drainer and unmaps the segment. It returns
// nil; later calls wait for the first to finish.
func (e *Hybrid) Close() error {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		<-e.closedCh
		return nil
	}
	e.closing = true
	killed := e.killed
	e.mu.Unlock()
	defer close(e.closedCh)
	if e.seg == nil {
		return e.t.Close()
	}
	failed := e.t.failed()
	e.mb.close()
	if !killed && !failed {
		// Senders to this rank stop waiting for room.
		atomic.StoreUint32(e.me.closed, 1)
		for _, in := range e.ins {
			atomic.AddUint32(in.ctl.space, 1)
			futexWake(in.ctl.space)
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.closeWait)
		var wg sync.WaitGroup
		for _, o := range e.outs {
			wg.Go(func() {
				if !e.sayGoodbye(ctx, o) {
					// No goodbye in order: let the peer see the
					// connection end without one.
					e.t.conns[o.peer].conn.Close()
				}
			})
		}
		wg.Wait()
		cancel()
	}
	e.t.Close()
	close(e.drainStop)
	atomic.AddUint32(e.me.drain, 1)
	futexWake(e.me.drain)
	e.wg.Wait()
	e.mapMu.Lock()
	e.unmapped = true
	e.unrefMap()
	e.mapMu.Unlock()
	return nil
}

// unrefMap drops a reference to the mapping: Close's, or a started send's
// (see StartSend). The last one unmaps the segment.
func (e *Hybrid) unrefMap() {
	if e.mapRefs.Add(-1) == 0 {
		unmapSegment(e.seg)
	}
}

// sayGoodbye writes the goodbye record after o's last message. It reports
// false if that could not be done in time (the peer must then learn it
// otherwise); a peer that closed needs none.
func (e *Hybrid) sayGoodbye(ctx context.Context, o *ringOut) bool {
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
