package transport

import (
	"math/bits"

	"github.com/gocomm/comm/internal/bufpool"
)

// Buffers for messages that arrive before their receive is posted (see
// recSingle and pooledMax). Fresh memory costs a page fault per page on
// first touch, which on a virtual machine can be slower than the copy
// itself; recycled
// buffers are already mapped. Buffers of up to smallMax bytes come from a
// pool of their own, in power-of-two classes, so that a message of a few
// KiB does not hold a 1 MiB buffer: a loop of small operations would
// otherwise allocate one per operation, and fresh heap memory
// page-faults there too: a small all-reduce over TCP ran several times
// slower until the first garbage collection let the heap be reused (see
// pooledMax).
const (
	bigMinShift = 20 // the smallest class: 1 MiB
	bigClasses  = 11 // up to 1 GiB
	smallMax    = 1 << (bigMinShift - 1)
)

var bigPool, smallPool bufpool.Pool

// bigClass returns the class of a buffer of n bytes, or -1.
func bigClass(n int) int {
	if n <= 0 {
		return -1
	}
	c := max(bits.Len(uint(n-1))-bigMinShift, 0)
	if c >= bigClasses {
		return -1
	}
	return c
}

// getBig returns a buffer of n bytes (contents undefined) whose capacity
// is n rounded up to a power of two.
func getBig(n int) []byte {
	if n > 0 && n <= smallMax {
		return smallPool.Get(n)
	}
	c := bigClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	return bigPool.Get(1 << (c + bigMinShift))[:n]
}

// putBig recycles a buffer from getBig; others are left to the GC.
func putBig(b []byte) {
	if cap(b) <= smallMax {
		smallPool.Put(b)
		return
	}
	if c := bigClass(cap(b)); c >= 0 && cap(b) == 1<<(c+bigMinShift) {
		bigPool.Put(b)
	}
}
