package transport

import (
	"math/bits"

	"github.com/gocomm/comm/internal/bufpool"
)

// Large buffers for messages that arrive before their receive is posted
// (see recSingle and pooledMin). Fresh memory costs a page fault per page
// on first touch, which on a VM is slower than the copy itself; recycled
// buffers are already mapped.
const (
	bigMinShift = 20 // the smallest class: 1 MiB
	bigClasses  = 11 // up to 1 GiB
)

var bigPool bufpool.Pool

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
// is n rounded up to a power of two of at least 1 MiB.
func getBig(n int) []byte {
	c := bigClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	return bigPool.Get(1 << (c + bigMinShift))[:n]
}

// putBig recycles a buffer from getBig; others are left to the GC.
func putBig(b []byte) {
	if c := bigClass(cap(b)); c >= 0 && cap(b) == 1<<(c+bigMinShift) {
		bigPool.Put(b)
	}
}
