package native

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/internal/transport"
)

// topology is how a communicator's ranks spread over hosts, for
// hierarchical collectives: a communicator of the ranks on this host (local
// rank 0 is the host's leader, its lowest rank) and, on leaders, a
// communicator of every host's leader.
type topology struct {
	hosts    int
	hostOf   []int // communicator rank -> host index (in order of first rank)
	leaderOf []int // host index -> communicator rank of its leader
	local    *Comm
	leaders  *Comm // nil on ranks that lead no host
	useful   bool  // several hosts, and some host holds several ranks
}

// topologyOnce computes c's topology on first use.
type topologyOnce struct {
	once sync.Once
	t    *topology
	err  error
}

// topo returns c's topology, or nil if the endpoint cannot tell hosts apart.
func (c *Comm) topo(ctx context.Context) (*topology, error) {
	c.topology.once.Do(func() { c.topology.t, c.topology.err = c.buildTopology(ctx) })
	return c.topology.t, c.topology.err
}

func (c *Comm) buildTopology(ctx context.Context) (*topology, error) {
	ht, ok := c.ep.(transport.HostTopology)
	if !ok {
		return nil, nil
	}
	t := &topology{hostOf: hostIndices(c.members, ht.HostOf)} // hosts.go
	for r, h := range t.hostOf {
		if h == len(t.leaderOf) { // the host's first rank
			t.leaderOf = append(t.leaderOf, r)
		}
	}
	t.hosts = len(t.leaderOf)
	t.useful = t.hosts > 1 && t.hosts < c.size
	if !t.useful {
		return t, nil
	}
	var local []int
	for r, h := range t.hostOf {
		if h == t.hostOf[c.rank] {
			local = append(local, r)
		}
	}
	// Sub-communicator ids: every member derives the same ones from c's id.
	g, err := c.Group(ctx, local, backend.GroupID(c.id, 0, -2-int64(t.hostOf[c.rank])))
	if err != nil {
		return nil, err
	}
	t.local = g.(*Comm)
	t.local.outer = c
	if t.leaderOf[t.hostOf[c.rank]] == c.rank {
		g, err := c.Group(ctx, t.leaderOf, backend.GroupID(c.id, 0, -1))
		if err != nil {
			return nil, err
		}
		t.leaders = g.(*Comm)
		t.leaders.outer = c
	}
	return t, nil
}

// sub runs one phase of a hierarchical collective on a sub-communicator.
func sub(ctx context.Context, g *Comm, req *backend.Request, kind core.Kind, op core.Op, root int, send, recv []byte) error {
	r := *req
	r.Kind, r.Op, r.Root, r.Send, r.Recv = kind, op, root, send, recv
	r.Algorithm, r.Chunk = algo.Auto, 0
	r.SigCount = len(recv) / req.DType.Size()
	if kind == core.KindReduce {
		r.SigCount = len(send) / req.DType.Size()
	}
	err := g.collective(ctx, &r)
	var phase *core.OpError
	if errors.As(err, &phase) {
		// Say it as the caller's collective, in the caller's ranks (the
		// phase's error already names peers that way: Comm.outer).
		return &core.OpError{Op: req.Kind, Rank: phase.Rank, Peer: phase.Peer, Seq: req.Seq,
			Err: fmt.Errorf("in its hierarchical %v phase: %w", kind, phase.Err)}
	}
	return err
}

// hierarchicalAllReduce reduces inside each host to its leader, all-reduces
// among the leaders, and broadcasts inside each host. Avg is summed and
// divided once at the end, by the whole communicator's size.
func (c *Comm) hierarchicalAllReduce(ctx context.Context, t *topology, req *backend.Request) error {
	op := req.Op
	if op == core.Avg {
		op = core.Sum
	}
	if err := sub(ctx, t.local, req, core.KindReduce, op, 0, req.Send, req.Recv); err != nil {
		return err
	}
	if t.leaders != nil {
		if err := sub(ctx, t.leaders, req, core.KindAllReduce, op, 0, req.Recv, req.Recv); err != nil {
			return err
		}
	}
	if err := sub(ctx, t.local, req, core.KindBroadcast, op, 0, req.Recv, req.Recv); err != nil {
		return err
	}
	if req.Op == core.Avg {
		if err := kernel.Divide(req.DType, req.Recv, c.size); err != nil {
			return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: -1, Seq: req.Seq, Err: err}
		}
	}
	return nil
}

// hierarchicalBroadcast broadcasts inside the root's host, then among the
// leaders from the root's host's leader, then inside every other host.
func (c *Comm) hierarchicalBroadcast(ctx context.Context, t *topology, req *backend.Request) error {
	rootHost, myHost := t.hostOf[req.Root], t.hostOf[c.rank]
	if myHost == rootHost {
		if err := sub(ctx, t.local, req, core.KindBroadcast, req.Op, t.local.localRank(req.Root, c), req.Recv, req.Recv); err != nil {
			return err
		}
	}
	if t.leaders != nil {
		if err := sub(ctx, t.leaders, req, core.KindBroadcast, req.Op, rootHost, req.Recv, req.Recv); err != nil {
			return err
		}
	}
	if myHost != rootHost {
		return sub(ctx, t.local, req, core.KindBroadcast, req.Op, 0, req.Recv, req.Recv)
	}
	return nil
}

// localRank translates a rank of parent into g's rank.
func (g *Comm) localRank(r int, parent *Comm) int {
	w := parent.members[r]
	for i, m := range g.members {
		if m == w {
			return i
		}
	}
	return -1
}
