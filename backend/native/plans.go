package native

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// planKey identifies a plan of an operation with even counts; plans of the
// V variants and all-to-all depend on whole count vectors and are not cached.
type planKey struct {
	kind  core.Kind
	algo  algo.Algorithm
	count int
	root  int
	chunk int
}

// planCache keeps recently used plans: building one allocates, and
// latency-bound loops call the same collective with the same size over and
// over. Plans are never modified after they are built, so they are shared.
// The plan used last is also kept apart, read without the lock or the
// map: a loop of one collective finds it there.
type planCache struct {
	last  atomic.Pointer[cachedPlan]
	mu    sync.Mutex // protects plans
	plans map[planKey]*cachedPlan
}

// cachedPlan is a plan with its key.
type cachedPlan struct {
	key  planKey
	plan algo.Plan
}

const maxCachedPlans = 256

func (pc *planCache) get(k planKey, build func() (algo.Plan, error)) (algo.Plan, error) {
	if l := pc.last.Load(); l != nil && l.key == k {
		return l.plan, nil
	}
	pc.mu.Lock()
	cp := pc.plans[k]
	pc.mu.Unlock()
	if cp == nil {
		p, err := build()
		if err != nil {
			return p, err
		}
		cp = &cachedPlan{key: k, plan: p}
		pc.mu.Lock()
		if pc.plans == nil || len(pc.plans) >= maxCachedPlans {
			pc.plans = make(map[planKey]*cachedPlan)
		}
		pc.plans[k] = cp
		pc.mu.Unlock()
	}
	pc.last.Store(cp)
	return cp.plan, nil
}

// plan returns this rank's plan for req under algorithm a: from the cache
// for the kinds whose plans depend on one count, else built afresh.
func (c *Comm) plan(req *backend.Request, a algo.Algorithm) (algo.Plan, error) {
	es := max(req.DType.Size(), 1)
	cached := func(root, count int, build func() (algo.Plan, error)) (algo.Plan, error) {
		return c.plans.get(planKey{kind: req.Kind, algo: a, count: count, root: root, chunk: req.Chunk}, build)
	}
	switch req.Kind {
	case core.KindAllReduce:
		count := len(req.Recv) / es
		return cached(0, count, func() (algo.Plan, error) { return algo.AllReduce(a, c.rank, c.size, count, req.Chunk) })
	case core.KindReduce:
		count := len(req.Send) / es
		if inRankOrder(req) && req.Root != 0 {
			return algo.ReduceInOrder(c.rank, c.size, req.Root, count)
		}
		return cached(req.Root, count, func() (algo.Plan, error) { return algo.Reduce(a, c.rank, c.size, req.Root, count) })
	case core.KindBroadcast:
		count := len(req.Recv) / es
		return cached(req.Root, count, func() (algo.Plan, error) {
			return algo.Broadcast(a, c.rank, c.size, req.Root, count, req.Chunk)
		})
	case core.KindAllGather, core.KindAllGatherV:
		return algo.AllGather(a, c.rank, c.size, req.Counts)
	case core.KindGather, core.KindGatherV:
		return algo.Gather(a, c.rank, c.size, req.Root, req.Counts)
	case core.KindScatter, core.KindScatterV:
		return algo.Scatter(a, c.rank, c.size, req.Root, req.Counts)
	case core.KindReduceScatter, core.KindReduceScatterV:
		return algo.ReduceScatter(a, c.rank, c.size, req.Counts)
	case core.KindAllToAll, core.KindAllToAllV:
		return algo.AllToAll(a, c.rank, c.size, req.Counts, req.RecvCounts)
	case core.KindBarrier:
		return cached(0, 0, func() (algo.Plan, error) { return algo.Barrier(a, c.rank, c.size) })
	}
	return algo.Plan{}, fmt.Errorf("comm: the native backend has no operation %v", req.Kind)
}
