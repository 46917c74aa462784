package native

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/bufpool"
	"github.com/gocomm/comm/internal/cpubind"
	"github.com/gocomm/comm/internal/opctx"
	"github.com/gocomm/comm/internal/shmcoll"
	"github.com/gocomm/comm/internal/transport"
	"github.com/gocomm/comm/internal/turn"
)

// Name is the name the native backend registers under.
const Name = "native"

func init() { backend.Register(Name, Driver{}) }

// Driver opens native communicators over shared memory between ranks of
// one host and TCP between hosts (see backend.TransportConfig), or, for a
// world of one, over nothing at all.
type Driver struct{}

var _ backend.Driver = Driver{}

// Open connects to every other rank through cfg.Store and returns the world
// communicator.
func (Driver) Open(ctx context.Context, cfg backend.Config) (backend.Comm, error) {
	if cfg.Size == 1 {
		return NewWorld(transport.NewInprocWorld(1, transport.InprocOptions{})[0], cfg), nil
	}
	if cfg.Store == nil {
		return nil, errors.New("comm: native backend: a store is needed for a world of more than one rank")
	}
	tcp := transport.TCPOptions{
		Rank:         cfg.Rank,
		Size:         cfg.Size,
		Prefix:       "gocomm/native",
		ListenHost:   cfg.ListenHost,
		Interface:    cfg.Transport.Interface,
		Congestion:   cfg.Transport.TCPCongestion,
		MasterHost:   cfg.Transport.MasterHost,
		StoreLocalIP: net.ParseIP(cfg.Transport.StoreLocalIP),
		Secret:       cfg.Secret,
	}
	// Even over TCP alone the hybrid endpoint knows which ranks share a
	// host (transport.HostTopology).
	ep, err := transport.ConnectHybrid(ctx, cfg.Store, transport.HybridOptions{
		TCPOptions: tcp, HostID: cfg.Transport.HostID, Transport: cfg.Transport.Mode,
		SHM: transport.SHMOptions{SingleCopyBytes: cfg.Transport.SingleCopyBytes, Stores: cfg.Transport.SHMStores, Areas: shmcoll.Areas},
	})
	if err != nil {
		return nil, err
	}
	return NewWorld(ep, cfg), nil
}

// worldID is the communicator id of a world; groups derive theirs from it.
const worldID = 1

// Comm is a native communicator: a world, or a group sharing its world's
// endpoint.
type Comm struct {
	ep      transport.Endpoint
	cfg     backend.Config
	id      uint64
	rank    int   // this rank in the communicator
	size    int   // communicator size
	members []int // communicator rank -> world rank
	world   *Comm // nil for the world itself
	// outer, for a hierarchical phase's sub-communicator, is the
	// communicator whose collective it serves: errors name its ranks.
	outer *Comm

	// pool is used through the world's Comm (root()); plans are per communicator.
	pool     bufpool.Pool
	plans    planCache
	topology topologyOnce
	// waits, on the world only, tells peers whom this rank waits for.
	waits *waitWatch

	closed atomic.Bool // read by every operation: no lock

	// crowd caches crowding(): 0 not yet known, else its answer.
	crowd atomic.Int32

	// board, on a world whose ranks all share this host's memory, runs
	// small collectives (board.go); turn then orders the collectives.
	board *shmcoll.Board
	turn  turn.Turn
	// turnCtx bounds the operation holding the turn when run inline
	// (InlineAllReduce) by the communicator's timeout: one at a time.
	turnCtx opctx.Owned
	// manyPerCPU: the board's ranks outnumber the host's CPUs.
	manyPerCPU bool
	// sharedAllocs: this world has made a shared allocation (shared.go),
	// so its stage all-reduces first ask whether their buffers are shared.
	sharedAllocs atomic.Bool
}

var (
	_ backend.Comm            = (*Comm)(nil)
	_ backend.FailureSignal   = (*Comm)(nil)
	_ backend.Settler         = (*Comm)(nil)
	_ backend.SharedAllocator = (*Comm)(nil)
)

// NewWorld wraps an endpoint as a world communicator.
func NewWorld(ep transport.Endpoint, cfg backend.Config) *Comm {
	members := make([]int, ep.Size())
	for i := range members {
		members[i] = i
	}
	c := &Comm{ep: ep, cfg: cfg, id: worldID, rank: ep.Rank(), size: ep.Size(), members: members,
		waits: newWaitWatch(ep, cfg.Timeout)}
	if h, ok := ep.(*transport.Hybrid); ok {
		if c.board = shmcoll.New(h.Areas()); c.board != nil {
			c.board.SetWaitHook(c.waits.begin)
			c.manyPerCPU = c.size > cpubind.HostCPUs()
		}
	}
	return c
}

// Rank is this rank within the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.size }

// Group returns the sub-communicator of members (ranks of c).
func (c *Comm) Group(ctx context.Context, members []int, id uint64) (backend.Comm, error) {
	g := &Comm{ep: c.ep, cfg: c.cfg, id: id, rank: -1, size: len(members), members: make([]int, len(members)), world: c.root()}
	for i, m := range members {
		if m < 0 || m >= c.size {
			return nil, fmt.Errorf("comm: group member %d out of range [0,%d)", m, c.size)
		}
		g.members[i] = c.members[m]
		if m == c.rank {
			g.rank = i
		}
	}
	if g.rank < 0 {
		return nil, fmt.Errorf("comm: this rank (%d) is not among the group members %v", c.rank, members)
	}
	return g, nil
}

// shownRank is how errors name rank r of c: as the rank of the outer
// communicator for a hierarchical phase, else as it is.
func (c *Comm) shownRank(r int) int {
	if c.outer == nil || r < 0 || r >= len(c.members) {
		return r
	}
	w := c.members[r]
	for i, m := range c.outer.members {
		if m == w {
			return i
		}
	}
	return r
}

func (c *Comm) root() *Comm {
	if c.world != nil {
		return c.world
	}
	return c
}

// Abort fails everything pending on the world with err and tells the peers.
func (c *Comm) Abort(err error) { c.ep.Abort(err) }

// Failed returns a channel closed once the world's endpoint has failed
// (backend.FailureSignal), or nil when the endpoint cannot tell.
func (c *Comm) Failed() <-chan struct{} {
	if fs, ok := c.ep.(transport.FailureSignal); ok {
		return fs.Failed()
	}
	return nil
}

// Close closes a group, or the world with its endpoint.
func (c *Comm) Close() error {
	if c.closed.Swap(true) || c.world != nil {
		return nil
	}
	c.waits.close()
	return c.ep.Close()
}

func (c *Comm) isClosed() bool {
	return c.closed.Load() || (c.world != nil && c.world.isClosed())
}

// Run performs one operation.
// settleTime is how long comm.Init keeps a rank of this backend busy once
// set up (backend.Settler), when its shared-memory waits sleep holding
// their P (transport.Hybrid.SleepsHoldingP): Init's own waits for its
// peers (the store, the connections) restarted the Go runtime's monitor
// at its fastest tick, which takes a share of the rank's core for a while,
// and the first operations would run through it. Once slowed down, the
// monitor stays slow, as such a rank's waits no longer give their P
// back. It trades Init's latency for a steadier tail of the first
// operations (see docs/tuning.md).
const settleTime = 20 * time.Millisecond

// SettleTime is backend.Settler's: settleTime for a world communicator
// whose rank sleeps holding its P, else 0.
func (c *Comm) SettleTime() time.Duration {
	if h, ok := c.ep.(*transport.Hybrid); ok && h.SleepsHoldingP() {
		return settleTime
	}
	return 0
}

func (c *Comm) Run(ctx context.Context, req *backend.Request) error {
	if c.isClosed() {
		return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: -1, Seq: req.Seq, Err: transport.ErrClosed}
	}
	if c.board != nil && req.Seq != 0 {
		if done, err := c.runOnBoard(ctx, req); done {
			return err
		}
	}
	switch req.Kind {
	case core.KindSend:
		return c.send(ctx, req)
	case core.KindRecv:
		return c.recv(ctx, req)
	case core.KindMonitoredBarrier:
		return c.monitoredBarrier(ctx, req)
	}
	return c.collective(ctx, req)
}

func (c *Comm) p2pHeader(req *backend.Request) transport.Header {
	return transport.Header{
		Comm: c.id,
		Tag:  uint64(req.Tag),
		Sig:  transport.Signature{Kind: core.KindSend, DType: req.DType, Count: uint64(req.SigCount)},
	}
}

func (c *Comm) send(ctx context.Context, req *backend.Request) error {
	if err := c.ep.Send(ctx, c.members[req.Peer], c.p2pHeader(req), req.Send); err != nil {
		return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: req.Peer, Err: err}
	}
	return nil
}

func (c *Comm) recv(ctx context.Context, req *backend.Request) error {
	peer := transport.AnySource
	if req.Peer >= 0 {
		peer = c.members[req.Peer]
	}
	var from int
	var err error
	if req.UpTo {
		req.Received, from, err = c.recvUpTo(ctx, peer, req)
	} else {
		from, err = c.ep.Recv(ctx, peer, c.p2pHeader(req), req.Recv)
		req.Received = len(req.Recv)
	}
	if err != nil {
		return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: req.Peer, Err: err}
	}
	req.Source = c.commRank(from)
	return nil
}

func (c *Comm) commRank(world int) int {
	for i, w := range c.members {
		if w == world {
			return i
		}
	}
	return -1
}

// monitoredBarrier: every rank reports to rank 0, which waits up to
// req.Timeout, then answers each rank with one byte per rank (1 = did not
// arrive in time). Nothing is aborted: a late rank finds the answer waiting
// when it arrives.
func (c *Comm) monitoredBarrier(ctx context.Context, req *backend.Request) error {
	h := transport.Header{Comm: c.id, Seq: req.Seq, Sig: transport.Signature{Kind: core.KindMonitoredBarrier}}
	report := func(late []int) error {
		if len(late) == 0 {
			return nil
		}
		return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: late[0], Seq: req.Seq,
			Err: &core.BarrierError{Late: late, Timeout: req.Timeout}}
	}
	if c.rank != 0 {
		h.Tag = 0
		if err := c.ep.Send(ctx, c.members[0], h, nil); err != nil {
			return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: 0, Seq: req.Seq, Err: err}
		}
		status := make([]byte, c.size)
		h.Tag = 1
		if _, err := c.ep.Recv(ctx, c.members[0], h, status); err != nil {
			return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: 0, Seq: req.Seq, Err: err}
		}
		return report(lateRanks(status))
	}
	status := make([]byte, c.size)
	deadline := time.Now().Add(req.Timeout)
	for r := 1; r < c.size; r++ {
		if status[r] != 0 {
			continue
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		h.Tag = 0
		_, err := c.ep.Recv(wctx, c.members[r], h, nil)
		cancel()
		switch {
		case err == nil:
		case wctx.Err() != nil && ctx.Err() == nil:
			status[r] = 1
			if !req.WaitAll {
				for q := r + 1; q < c.size; q++ {
					status[q] = 1
				}
				continue
			}
		default:
			return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: r, Seq: req.Seq, Err: err}
		}
	}
	if !req.WaitAll {
		// Only the first late rank is known for sure; report that one.
		if late := lateRanks(status); len(late) > 0 {
			for q := late[0] + 1; q < c.size; q++ {
				status[q] = 0
			}
			status[late[0]] = 1
		}
	}
	h.Tag = 1
	for r := 1; r < c.size; r++ {
		if err := c.ep.Send(ctx, c.members[r], h, status); err != nil {
			return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: r, Seq: req.Seq, Err: err}
		}
	}
	return report(lateRanks(status))
}

func lateRanks(status []byte) []int {
	var late []int
	for r, s := range status {
		if s != 0 {
			late = append(late, r)
		}
	}
	sort.Ints(late)
	return late
}
