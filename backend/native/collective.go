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
	if req.Kind == backend.KindAllReduce {
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
	if req.Kind == backend.KindBroadcast && a == algo.Ring && c.crowding() == crowdedTCP {
		a, chunk = algo.Linear, 0
	}
	if req.Kind == backend.KindAllReduce {
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
// waits for a switch of the CPU (35-60 us on this VM class): recursive
// doubling pairs every rank with every other in log2(n) full-vector
// exchanges, the ring makes 2(n-1) dependent steps, the tree 2 log2(n)
// with half the ranks idle, and the linear schedule has each rank send
// once and receive once while rank 0 does the n-1 reductions; all move
// the same bytes in total. Measured (commbench, shm, forced algorithms,
// interleaved rounds, medians of loop time, 2026-11-25 00:27-00:29, 4
// ranks on 2 CPUs, 6-10 rounds), linear / tree / ring / rd: 1 KiB
// 62/43/55/116 us, 4 KiB 44/42/56/154, 8 KiB 44/47/60/134, 32 KiB
// 60/66/71/75, 64 KiB 85/92/98/117, 128 KiB 156/179/146/181 (the ring
// above 64 KiB, as the cost model has it); 512 B 33/27/52/31 and 8-64 B
// rd best (16-17 us against 24-52). 3 ranks on 2 CPUs: linear and tree
// 5-20% ahead of the ring from 1 to 64 KiB. An earlier session's rule
// (the ring from 1 KiB) had replaced recursive doubling's 100-250 us.
const (
	crowdedTreeBytes   = 1 << 10
	crowdedLinearBytes = 8 << 10
)

// On a crowded host whose ranks reach each other over TCP (crowdedTCP),
// an all-reduce of up to crowdedTCPLinearMax bytes takes the linear
// schedule: every exchange there waits for the kernel's socket wake-up
// as well as for a switch of the CPU, and the linear schedule has the
// fewest dependent exchanges. Measured (commbench -n 4 --transport tcp,
// forced algorithms, 2 rounds, 2026-11-28 09:10-09:15, 4 ranks on 2
// CPUs), linear / rd / tree / ring in us: 8 B 81-86 / 88-91 / 121-123 /
// 113-115, 512 B 80-85 / 89-91 / 124-126 / 182, 4 KiB 80-82 / 95-97 /
// 133-135 / 178-181, 32 KiB 109 / 176-179 / 155-161 / 253-264; 128 KiB
// linear 219-305 against the ring's 517-533, 256 KiB 321-421 against
// 383-397, 1 MiB 2048-2133 against 967-1010.
const crowdedTCPLinearMax = 128 << 10

// On a crowded host whose ranks reach each other over TCP, an all-reduce
// from crowdedTCPHalvingMin up to (not including) crowdedTCPHalvingMax
// takes Rabenseifner's halving-doubling instead of the ring when the
// ranks are a power of two: 2 log2(n) dependent exchanges instead of
// 2(n-1), the same bytes, and every exchange waits for a socket wake-up
// and a switch of the CPU. Larger ones keep the ring, likely because
// halving's first and doubling's last exchange (half the vector each)
// pair ranks n/2 apart, which GOCOMM_BIND=auto puts on one CPU when the
// CPUs divide n/2, and bandwidth counts more than steps there. Measured
// (commbench -n 4 --transport tcp, forced ring / halving-doubling
// alternating, 5 rounds, 2026-11-29 02:31-02:40, 4 ranks on 2 CPUs,
// docs/results/2026-11-29/crowded-tcp-hd.txt; loop time in us): 256 KiB
// 487-573 / 508-734 (the ring, 10 of 10), 384 KiB 778-975 / 671-824 (hd
// 5 of 5, but below the conformance sizes' 512 KiB), 512 KiB 920-1177 /
// 810-970 (4 of 5), 1 MiB 1347-1523 / 1142-1255 (5 of 5), 2 MiB
// 2346-2487 / 1989-2133 (5 of 5), 3 MiB 3374-3558 / 2784-3222 (5 of 5),
// 4 MiB 4215-5306 / 4088-5399 (hd 4 of 8), 8 MiB 8780-9240 /
// 11116-14942, 16 MiB 21469-23499 / 29233-32968. 3 ranks on 2 CPUs (hd
// folds the third in, 4 more exchanges): the ring 4 of 4 at 2 MiB, mixed
// below, so the ring stays.
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
// turns on the CPU it leaves. Measured (commbench -n 4 --transport tcp,
// forced algorithms, 3 interleaved rounds, 2026-11-28 11:45-11:55, 4 ranks
// on 2 CPUs), pipelined ring / linear / tree in ms: 4 MiB 5.4-8.6 /
// 4.1-5.5 / 3.2-4.8, 16 MiB 28-40 / 19-20 / 20-27, 64 MiB 98-139 /
// 72.5-73.2 (one round 103) / 84-95, against Open MPI's best 65.7-71.6.

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
func hierarchicalKind(k backend.Kind) bool {
	return k == backend.KindAllReduce || k == backend.KindBroadcast
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
