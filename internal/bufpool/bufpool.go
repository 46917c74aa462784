package bufpool

import (
	"math/bits"
	"sync"

	"github.com/gocomm/comm/internal/kernel"
)

// Pool recycles temporary buffers by power-of-two size class. Fresh
// memory is expensive (page faults on first touch cost more than the copy
// itself on small VMs), so a steady stream of collectives should allocate
// nothing. The zero value is ready to use.
type Pool struct {
	classes [48]sync.Pool // class c holds *[]byte of capacity 1<<c
	// boxes holds empty *[]byte: Get leaves the box of the buffer it takes
	// here and Put reuses one, so that recycling allocates nothing.
	boxes sync.Pool
}

// Get returns an 8-byte aligned buffer of n bytes (contents undefined).
func (p *Pool) Get(n int) []byte {
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

// Put returns a buffer obtained from Get; others are ignored.
func (p *Pool) Put(b []byte) {
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
