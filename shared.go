package comm

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// AllocShared returns n zeroed elements of memory that every rank of c
// maps, when c's ranks all run on one host and its backend can share
// memory (the native backend on a world whose ranks share this host's
// segment); otherwise ordinary memory, which works the same, only no
// faster. Every rank of c calls it together, with the same n, as a
// collective (mismatched lengths are an error on every rank).
//
// An all-reduce above 8 KiB (no algorithm forced, no user-defined op)
// whose send and recv lie in shared allocations on every rank reads each
// rank's input where it is and writes each rank's result
// into its recv, instead of copying both through the shared-memory
// segment: about 2 bytes through memory per input byte against 5 (2 ranks,
// 64 MiB float32: docs/performance.md gives the figures). Other collectives, and
// all-reduces up to 8 KiB (which run on the board), treat the memory as
// any other. It is what MPI_Win_allocate_shared and torch's symmetric
// memory give their users. Once c has made one, every all-reduce above 8
// KiB on c first has the ranks post where their buffers are (a small
// fixed cost).
//
// The memory is reserved when made: where the host's shared-memory file
// system has no room for it (a container's 64 MB /dev/shm), AllocShared
// fails on every rank with an error that says so.
//
// The memory is not Go's: it holds numbers only, the garbage collector
// neither scans nor frees it, and it stays valid after c is closed, until
// FreeShared. Peers write into it during an all-reduce whose recv it is,
// as they read it during one whose send it is: touch it only as any
// collective's buffer.
func AllocShared[T Numeric](ctx context.Context, c *Comm, n int) ([]T, error) {
	if err := c.usable("AllocShared"); err != nil {
		return nil, err
	}
	// A bad argument fails every rank at once, as a collective's does.
	var z T
	size := int(unsafe.Sizeof(z))
	switch {
	case ctx == nil:
		return nil, c.failCollective(core.KindAllReduce, errNilContext("AllocShared"))
	case n < 0:
		return nil, c.failCollective(core.KindAllReduce, fmt.Errorf("%w: AllocShared of %d elements: pass n >= 0", ErrInvalid, n))
	case n > math.MaxInt/size:
		return nil, c.failCollective(core.KindAllReduce, fmt.Errorf("%w: AllocShared of %d elements of %d bytes is too large", ErrInvalid, n, size))
	}
	// Every rank must ask for as much: an all-reduce of [n, -n] with Max
	// gives [n, -n] back only if no rank asked for more or for less.
	ctx = WithLogName(ctx, "alloc_shared")
	lens := []int64{int64(n), -int64(n)}
	if err := AllReduce(ctx, c, lens, lens, Max); err != nil {
		return nil, fmt.Errorf("comm: AllocShared: %w", err)
	}
	if lens[0] != int64(n) || -lens[1] != int64(n) {
		return nil, fmt.Errorf("%w: AllocShared: this rank asked for %d elements, others for %d to %d: pass the same n on every rank",
			ErrMismatch, n, -lens[1], lens[0])
	}
	sa, ok := c.be.(backend.SharedAllocator)
	if !ok || n == 0 {
		return make([]T, n), nil
	}
	id := c.sharedIDs.Add(1)
	agree := func(ok bool) error {
		flag := []int32{0}
		if ok {
			flag[0] = 1
		}
		if err := AllReduce(ctx, c, flag, flag, Min); err != nil {
			return err
		}
		if flag[0] != 1 {
			return fmt.Errorf("comm: AllocShared: another rank could not share its memory (its error says why)")
		}
		return nil
	}
	mem, err := sa.AllocShared(id, n*size, agree)
	if err != nil {
		return nil, fmt.Errorf("comm: AllocShared of %d elements: %w", n, err)
	}
	if mem == nil {
		return make([]T, n), nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n), nil
}

// FreeShared releases buf, which AllocShared on c returned. It involves
// no other rank; buf must not be used after, nor be in an operation still
// running. Any other slice (ordinary memory, also from AllocShared where
// sharing was not possible, or a buffer freed already) is left alone.
func FreeShared[T Numeric](c *Comm, buf []T) error {
	if err := c.usable("FreeShared"); err != nil {
		return err
	}
	if sa, ok := c.be.(backend.SharedAllocator); ok && len(buf) > 0 {
		return sa.FreeShared(asBytes(buf))
	}
	return nil
}

// IsShared reports whether buf is (all within) memory that AllocShared on
// c returned and every rank maps: false for ordinary memory.
func IsShared[T Numeric](c *Comm, buf []T) bool {
	if c.usable("IsShared") != nil || len(buf) == 0 {
		return false
	}
	sa, ok := c.be.(backend.SharedAllocator)
	return ok && sa.IsShared(asBytes(buf))
}
