package native

import (
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
