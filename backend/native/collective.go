package native

import (
	"context"
	"fmt"
	"runtime"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/transport"
)

// collective runs one collective: choose the algorithm, lay out the
// buffers of req as its plan expects them (layouts), build the plan, run
// it, and copy the result where the caller wants it.
func (c *Comm) collective(ctx context.Context, req *backend.Request) error {
	a := c.choose(req)
	if inRankOrder(req) {
		a = c.inOrderChoice(req) // userop.go
	} else if a == algo.Hierarchical || (a == algo.Auto && hierarchicalKind(req.Kind)) {
		done, err := c.hierarchical(ctx, req)
		if done || err != nil {
			return err
		}
		// One host (or no topology): the flat cost model.
		a = c.flatChoice(req)
	}
	req.Used = a
	l, ok := layouts[req.Kind]
	if !ok {
		return c.opError(req, fmt.Errorf("comm: the native backend has no operation %v", req.Kind))
	}
	e := c.newExecution(req, a)
	defer e.release()
	t := temps{pool: &c.root().pool}
	defer t.release()
	l.prepare(c, e, req, &t)
	plan, err := c.plan(req, a)
	if err != nil {
		return c.opError(req, err)
	}
	if err := e.run(ctx, plan); err != nil {
		return err
	}
	if err := l.finish(c, e, req); err != nil {
		return c.opError(req, err)
	}
	return nil
}

// opError is err as the failure of req on this rank, no peer to blame.
func (c *Comm) opError(req *backend.Request, err error) error {
	return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: -1, Seq: req.Seq, Err: err}
}

// hierarchical runs req as a hierarchical collective if c's topology makes
// that useful (done), else leaves it to the flat schedules.
func (c *Comm) hierarchical(ctx context.Context, req *backend.Request) (done bool, err error) {
	t, err := c.topo(ctx)
	if err != nil {
		return false, c.opError(req, err)
	}
	if t == nil || !t.useful || !hierarchicalKind(req.Kind) {
		return false, nil
	}
	req.Used = algo.Hierarchical
	if req.Kind == core.KindAllReduce {
		return true, c.hierarchicalAllReduce(ctx, t, req)
	}
	return true, c.hierarchicalBroadcast(ctx, t, req)
}

// choose resolves req.Algorithm: a forced algorithm wins, then the
// configured override for the kind, then the cost model.
func (c *Comm) choose(req *backend.Request) algo.Algorithm {
	if req.Algorithm != algo.Auto {
		return req.Algorithm
	}
	if a := c.cfg.Algorithms.For(req.Kind); a != algo.Auto {
		return a
	}
	if hierarchicalKind(req.Kind) && c.maybeHierarchical() {
		return algo.Auto // collective asks the topology
	}
	return c.flatChoice(req)
}

// flatChoice is the choice among schedules over the whole communicator: a
// forced or configured flat algorithm, else the cost model (algo.Choose),
// which also sets req.Chunk for pipelined schedules if the caller did not.
func (c *Comm) flatChoice(req *backend.Request) algo.Algorithm {
	if req.Algorithm != algo.Auto && req.Algorithm != algo.Hierarchical {
		return req.Algorithm
	}
	if a := c.cfg.Algorithms.For(req.Kind); a != algo.Auto && a != algo.Hierarchical {
		return a
	}
	bytes := costBytes(req)
	a, chunk := algo.Choose(req.Kind, c.size, bytes, req.DType.Size())
	if req.Kind == core.KindBroadcast && a == algo.Ring && c.crowding() == crowdedTCP {
		a, chunk = algo.Linear, 0
	}
	if req.Kind == core.KindAllReduce {
		switch c.crowding() {
		case crowdedSHM:
			if a == algo.RecursiveDoubling && bytes >= crowdedTreeBytes {
				a, chunk = algo.Tree, 0
				if bytes >= crowdedLinearBytes {
					a = algo.Linear
				}
			}
		case crowdedTCP:
			switch {
			case bytes <= crowdedTCPLinearMax:
				a, chunk = algo.Linear, 0
			case bytes >= crowdedTCPHalvingMin && bytes < crowdedTCPHalvingMax && c.size&(c.size-1) == 0:
				a, chunk = algo.HalvingDoubling, 0
			}
		}
	}
	if req.Chunk == 0 {
		req.Chunk = chunk
	}
	return a
}

// On a crowded host (crowdedSHM), an all-reduce from crowdedTreeBytes up to
// the cost model's ring (algo.SmallMessage) takes the binomial tree, and
// from crowdedLinearBytes the linear schedule (Open MPI's basic_linear),
// instead of recursive doubling. With more ranks than CPUs, two ranks on
// one CPU take turns, and every step that makes one wait for the other
// waits for a switch of the CPU: recursive doubling pairs every rank
// with every other in log2(n) full-vector exchanges, the ring makes
// 2(n-1) dependent steps, the tree 2 log2(n) with half the ranks idle,
// and the linear schedule has each rank send once and receive once while
// rank 0 does the n-1 reductions; all move the same bytes in total. The
// thresholds trade fewer dependent steps against rank 0's extra work;
// they were measured with commbench on crowded hosts (see
// docs/tuning.md).
const (
	crowdedTreeBytes   = 1 << 10
	crowdedLinearBytes = 8 << 10
)

// On a crowded host whose ranks reach each other over TCP (crowdedTCP),
// an all-reduce of up to crowdedTCPLinearMax bytes takes the linear
// schedule: every exchange there waits for the kernel's socket wake-up
// as well as for a switch of the CPU, and the linear schedule has the
// fewest dependent exchanges. Above the bound, rank 0's n-1 reductions
// cost more than the exchanges saved and the ring is faster.
const crowdedTCPLinearMax = 128 << 10

// On a crowded host whose ranks reach each other over TCP, an all-reduce
// from crowdedTCPHalvingMin up to (not including) crowdedTCPHalvingMax
// takes Rabenseifner's halving-doubling instead of the ring when the
// ranks are a power of two: 2 log2(n) dependent exchanges instead of
// 2(n-1), the same bytes, and every exchange waits for a socket wake-up
// and a switch of the CPU. Larger ones keep the ring, likely because
// halving's first and doubling's last exchange (half the vector each)
// pair ranks n/2 apart, which GOCOMM_BIND=auto puts on one CPU when the
// CPUs divide n/2, and bandwidth counts more than steps there. With 3
// ranks (halving-doubling folds the third in, 4 more exchanges) the ring
// stays. The bounds were measured with commbench on crowded hosts (see
// docs/tuning.md).
const (
	crowdedTCPHalvingMin = 512 << 10
	crowdedTCPHalvingMax = 4 << 20
)

// On a crowded host whose ranks reach each other over TCP (crowdedTCP), a
// broadcast the cost model gives the pipelined ring (above
// algo.LargeMessage, more than two ranks) takes the linear schedule, the
// root sending to every peer at once (concurrentSends), as Open MPI's
// fastest here does (its basic_linear, algorithm 1): every hop of the
// ring's pipeline waits for a switch of the CPU and a socket wake-up
// per piece, and every rank but the last sends what it receives, while
// with the linear schedule only the root sends and the receivers take
// turns on the CPU it leaves.

// numCPU is runtime.NumCPU; tests replace it.
var numCPU = runtime.NumCPU

// How a host is crowded (crowding).
const (
	notCrowded = 1 + iota
	crowdedSHM // every rank of c shares memory with this one
	crowdedTCP // every rank of c is on this host, reached over TCP
)

// crowding says whether this host's ranks outnumber its CPUs, by at most
// two to one, with every rank of c on this host, and how they reach each
// other: all through shared memory (crowdedSHM), or all over TCP
// (crowdedTCP, as with GOCOMM_TRANSPORT=tcp). Cached in c.crowd.
func (c *Comm) crowding() int32 {
	if v := c.crowd.Load(); v != 0 {
		return v
	}
	v := int32(notCrowded)
	local, cpus := c.root().cfg.LocalSize, numCPU()
	if local > cpus && local <= 2*cpus {
		sm, _ := c.ep.(interface{ SharedMemory(peer int) bool })
		ht, _ := c.ep.(transport.HostTopology)
		shared, tcp := sm != nil, ht != nil
		for r, w := range c.members {
			if r == c.rank {
				continue
			}
			if sm == nil || !sm.SharedMemory(w) {
				shared = false
			} else {
				tcp = false
			}
			if ht != nil && ht.HostOf(w) != ht.HostOf(c.members[c.rank]) {
				tcp = false
			}
		}
		switch {
		case shared:
			v = crowdedSHM
		case tcp:
			v = crowdedTCP
		}
	}
	c.crowd.Store(v)
	return v
}

// costBytes is the message size the cost model sees (algo.MessageBytes):
// only from arguments all ranks share, never the buffers that only the
// root passes.
func costBytes(req *backend.Request) int {
	return algo.MessageBytes(req.Kind, req.DType.Size(), req.Counts, len(req.Send), len(req.Recv))
}

// hierarchicalKind reports whether the engine has a hierarchical form of k.
func hierarchicalKind(k core.Kind) bool {
	return k == core.KindAllReduce || k == core.KindBroadcast
}

// maybeHierarchical reports whether c's endpoint can tell hosts apart and
// c spans several of them (the topology decides the rest).
func (c *Comm) maybeHierarchical() bool {
	ht, ok := c.ep.(transport.HostTopology)
	if !ok || c.size < 3 {
		return false
	}
	first := ht.HostOf(c.members[0])
	for _, w := range c.members[1:] {
		if ht.HostOf(w) != first {
			return true
		}
	}
	return false
}
