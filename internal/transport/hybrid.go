package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/cpubind"
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
	mb         *mailbox // t's, shared with shm
	hostOf     []int    // world rank -> host index (hosts numbered by lowest rank)
	closeWait  time.Duration
	shm        *shmEndpoint // peers on this host; nil when none shares memory
	shmErr     error        // why this host fell back to TCP, if it did

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
// shmError). All ranks must call it concurrently.
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
	if len(local) > cpubind.HostCPUs() {
		t.crowd()
	}
	e := newHybrid(t, hostOf, o.CloseTimeout)
	if opts.Transport == TransportSHM && len(local) != o.Size {
		t.Close()
		return nil, fmt.Errorf("comm: transport: rank %d: shared memory needs every rank on this host (%q), but only ranks %v are", o.Rank, hostID, local)
	}
	if len(local) < 2 || opts.Transport == TransportTCP || !shmSupported {
		return e, nil
	}
	if err := e.shareMemory(ctx, store, &o, hostID, local, &opts); err != nil {
		t.Close()
		return nil, err
	}
	return e, nil
}

// shareMemory sets up the shared-memory endpoint with the ranks local of
// this host (this rank among them). On a fallback (see shmError) those
// peers stay on TCP, unless opts ask for shared memory only, which makes
// it an error.
func (e *Hybrid) shareMemory(ctx context.Context, store AddrStore, o *TCPOptions, hostID string, local []int, opts *HybridOptions) error {
	// Goodbyes from these peers must wait for their last message, which
	// comes through the rings after the TCP goodbye may have arrived.
	e.setInOrder(local, true)
	shm, fallback, err := newSHMEndpoint(ctx, store, o, hostID, local, opts.SHM, opts.mapHook, e.mb, e.t)
	if err == nil && fallback != nil && opts.Transport == TransportSHM {
		err = fmt.Errorf("comm: transport: rank %d: %w", o.Rank, fallback)
	}
	if err != nil {
		return err
	}
	if fallback != nil {
		e.shmErr = fallback
		e.setInOrder(local, false)
		return nil
	}
	e.shm = shm
	return nil
}

// setInOrder sets the mailbox's inOrder for the peers among local.
func (e *Hybrid) setInOrder(local []int, on bool) {
	for _, p := range local {
		if p != e.rank {
			e.mb.setInOrder(p, on)
		}
	}
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
		rank: t.Rank(), size: t.Size(), t: t, mb: t.mailbox(), hostOf: hostOf, closeWait: closeWait,
		closedCh: make(chan struct{}),
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
func (e *Hybrid) SharedMemory(peer int) bool { return e.shm != nil && e.shm.shares(peer) }

// SendsBuffered reports whether a send of n bytes to peer completes
// without the peer's help: it fits in half the pair's ring, so its copy
// into shared memory runs at once (else the peer's drainer empties the
// ring into its mailbox, so it completes anyway, only later). The engine
// runs such sends inline instead of in a goroutine of their own, whose
// scheduling costs more than the copy on a busy host.
func (e *Hybrid) SendsBuffered(peer, n int) bool {
	return e.shm != nil && e.shm.sendsBuffered(peer, n)
}

// shmError says why ranks on this host that could share memory use TCP
// instead (a rank could not map the segment), or is nil.
func (e *Hybrid) shmError() error { return e.shmErr }

// Send transmits payload to peer. Through shared memory it copies the
// payload into the ring (in pieces for large messages, as the receiver
// frees room) and returns when the last piece is in; it never waits for
// the matching receive. If ctx ends while a message is partly written, the
// endpoint aborts as with TCP (the peer sees the connection lost). See
// Endpoint.Send.
func (e *Hybrid) Send(ctx context.Context, peer int, h Header, payload []byte) error {
	return e.send(ctx, peer, h, payload, true)
}

// SendCopy is transport.CopySender's: Send, but to a peer on this host
// always through the ring, never by single copy.
func (e *Hybrid) SendCopy(ctx context.Context, peer int, h Header, payload []byte) error {
	return e.send(ctx, peer, h, payload, false)
}

// CopiesStartable is transport.CopySender's: whether StartSendCopy of n
// bytes to peer starts a stream through the ring (see SendsStartable).
func (e *Hybrid) CopiesStartable(peer, n int) bool {
	return e.shm != nil && e.shm.streamable(peer, n)
}

// StartSendCopy is transport.CopySender's: StartSend, but to a peer on
// this host always through the ring.
func (e *Hybrid) StartSendCopy(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error) {
	return e.startSend(ctx, peer, h, payload, false)
}

// send is Send, with single copy allowed to a peer on this host or not.
func (e *Hybrid) send(ctx context.Context, peer int, h Header, payload []byte, single bool) error {
	if err := checkPeer(e.rank, e.size, peer, false); err != nil {
		return err
	}
	if !e.SharedMemory(peer) {
		return e.t.Send(ctx, peer, h, payload)
	}
	err := e.shm.send(ctx, peer, h, payload, single)
	if err != nil {
		e.t.flushAbort()
	}
	return err
}

// SendsStartable reports whether a send of n bytes to peer goes by single
// copy, or through a ring it does not fit in at once, so that StartSend
// returns with the send in progress: the rest of it is written while the
// caller receives on the same goroutine, or by finish.
func (e *Hybrid) SendsStartable(peer, n int) bool {
	return e.shm != nil && e.shm.sendsStartable(peer, n)
}

// StartSend starts a send (see SendStarter): a single-copy send is
// published, a large one through a ring written as far as it fits, and
// finish ends them; any other send runs at once.
func (e *Hybrid) StartSend(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error) {
	return e.startSend(ctx, peer, h, payload, true)
}

// startSend is StartSend, with single copy allowed to a peer on this host
// or not.
func (e *Hybrid) startSend(ctx context.Context, peer int, h Header, payload []byte, single bool) (finish func(context.Context) error) {
	if e.shm != nil {
		if finish, started := e.shm.startSend(ctx, peer, h, payload, single); started {
			return finish
		}
	}
	return sendDone(e.send(ctx, peer, h, payload, single))
}

// Recv receives the next matching message into buf; see Endpoint.Recv.
// From a peer on this host (or from AnySource) the calling goroutine
// polls the rings itself unless another receive already does.
func (e *Hybrid) Recv(ctx context.Context, peer int, h Header, buf []byte) (int, error) {
	if err := checkPeer(e.rank, e.size, peer, true); err != nil {
		return -1, err
	}
	if e.shm == nil || !e.shm.polls(peer) {
		return e.t.Recv(ctx, peer, h, buf)
	}
	from, err := e.shm.recv(ctx, peer, h, buf, nil)
	if err != nil {
		// A failed receive returns only once this rank's abort (or the
		// one it passes on) is on its way to every peer.
		e.t.flushAbort()
	}
	return from, err
}

// RecvSink is transport.SinkReceiver's: from a peer on this host the
// pieces come straight out of the shared-memory ring (or, for a
// single-copy message, out of a small buffer each piece is copied into);
// from a peer over TCP out of the connection reader's buffer (TCP.RecvSink).
func (e *Hybrid) RecvSink(ctx context.Context, peer int, h Header, buf []byte, sink func(off int, p []byte)) (int, error) {
	if err := checkPeer(e.rank, e.size, peer, false); err != nil {
		return -1, err
	}
	if e.shm == nil || !e.shm.polls(peer) {
		return e.t.RecvSink(ctx, peer, h, buf, sink)
	}
	from, err := e.shm.recv(ctx, peer, h, buf, sink)
	if err != nil {
		e.t.flushAbort()
	}
	return from, err
}

// Abort fails every pending and later operation and tells every peer,
// returning once the abort frames are written; see TCP.Abort. After Close
// it does nothing.
func (e *Hybrid) Abort(err error) {
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if !closing {
		e.t.Abort(err) // does nothing once Close has begun
	}
}

// kill makes the endpoint vanish as if its process crashed (see
// TCP.kill): peers abort with ErrPeerLost naming this rank. Close must
// still be called. For fault-injection tests.
func (e *Hybrid) kill() {
	e.mu.Lock()
	e.killed = true
	e.mu.Unlock()
	e.t.kill()
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
	if e.shm == nil {
		return e.t.Close()
	}
	failed := e.t.failed()
	e.mb.close()
	if !killed && !failed {
		e.shm.depart(e.closeWait)
	}
	e.t.Close()
	e.shm.close()
	return nil
}
