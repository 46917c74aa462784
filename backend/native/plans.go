package native

import (
	"fmt"
	"sync"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
)

// planKey identifies a plan of an operation with even counts; plans of the
// V variants and all-to-all depend on whole count vectors and are not cached.
type planKey struct {
	kind  backend.Kind
	algo  algo.Algorithm
	count int
	root  int
	chunk int
}

// planCache keeps recently used plans: building one allocates, and
// latency-bound loops call the same collective with the same size over and
// over. Plans are never modified after they are built, so they are shared.
type planCache struct {
	mu    sync.Mutex // protects plans
	plans map[planKey]algo.Plan
}

const maxCachedPlans = 256

func (pc *planCache) get(k planKey, build func() (algo.Plan, error)) (algo.Plan, error) {
	pc.mu.Lock()
	p, ok := pc.plans[k]
	pc.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := build()
	if err != nil {
		return p, err
	}
	pc.mu.Lock()
	if pc.plans == nil || len(pc.plans) >= maxCachedPlans {
		pc.plans = make(map[planKey]algo.Plan)
	}
	pc.plans[k] = p
	pc.mu.Unlock()
	return p, nil
}

// plan returns this rank's plan for req under algorithm a: from the cache
// for the kinds whose plans depend on one count, else built afresh.
func (c *Comm) plan(req *backend.Request, a algo.Algorithm) (algo.Plan, error) {
	es := max(req.DType.Size(), 1)
	cached := func(root, count int, build func() (algo.Plan, error)) (algo.Plan, error) {
		return c.plans.get(planKey{kind: req.Kind, algo: a, count: count, root: root, chunk: req.Chunk}, build)
	}
	switch req.Kind {
	case backend.KindAllReduce:
		count := len(req.Recv) / es
		return cached(0, count, func() (algo.Plan, error) { return algo.AllReduce(a, c.rank, c.size, count, req.Chunk) })
	case backend.KindReduce:
		count := len(req.Send) / es
		if inRankOrder(req) && req.Root != 0 {
			return algo.ReduceInOrder(c.rank, c.size, req.Root, count)
		}
		return cached(req.Root, count, func() (algo.Plan, error) { return algo.Reduce(a, c.rank, c.size, req.Root, count) })
	case backend.KindBroadcast:
		count := len(req.Recv) / es
		return cached(req.Root, count, func() (algo.Plan, error) {
			return algo.Broadcast(a, c.rank, c.size, req.Root, count, req.Chunk)
		})
	case backend.KindAllGather, backend.KindAllGatherV:
		return algo.AllGather(a, c.rank, c.size, req.Counts)
	case backend.KindGather, backend.KindGatherV:
		return algo.Gather(a, c.rank, c.size, req.Root, req.Counts)
	case backend.KindScatter, backend.KindScatterV:
		return algo.Scatter(a, c.rank, c.size, req.Root, req.Counts)
	case backend.KindReduceScatter, backend.KindReduceScatterV:
		return algo.ReduceScatter(a, c.rank, c.size, req.Counts)
	case backend.KindAllToAll, backend.KindAllToAllV:
		return algo.AllToAll(a, c.rank, c.size, req.Counts, req.RecvCounts)
	case backend.KindBarrier:
		return cached(0, 0, func() (algo.Plan, error) { return algo.Barrier(a, c.rank, c.size) })
	}
	return algo.Plan{}, fmt.Errorf("comm: the native backend has no operation %v", req.Kind)
}
