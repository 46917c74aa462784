package native

import (
	"math/bits"
	"sync"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/kernel"
)

// bufPool recycles the engine's temporary buffers by power-of-two size
// class. Fresh memory is expensive (page faults on first touch cost more
// than the copy itself on small VMs), so a steady stream of collectives
// should allocate nothing.
type bufPool struct {
	classes [48]sync.Pool // class c holds *[]byte of capacity 1<<c
	// boxes holds empty *[]byte: get leaves the box of the buffer it takes
	// here and put reuses one, so that recycling allocates nothing.
	boxes sync.Pool
}

// get returns an 8-byte aligned buffer of n bytes (contents undefined).
func (p *bufPool) get(n int) []byte {
	if n <= 0 {
		return nil
	}
	c := bits.Len(uint(n - 1))
	if c >= len(p.classes) {
		return kernel.Alloc(n)
	}
	if v := p.classes[c].Get(); v != nil {
		box := v.(*[]byte)
		b := (*box)[:n]
		*box = nil
		p.boxes.Put(box)
		return b
	}
	return kernel.Alloc(1 << c)[:n]
}

// put returns a buffer obtained from get.
func (p *bufPool) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	c := bits.Len(uint(cap(b) - 1))
	if c >= len(p.classes) || 1<<c != cap(b) {
		return
	}
	box, _ := p.boxes.Get().(*[]byte)
	if box == nil {
		box = new([]byte)
	}
	*box = b[:cap(b)]
	p.classes[c].Put(box)
}

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
