//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gocomm/comm/core"
)

// mpiError converts a failed MPI return code into an *Error.
func mpiError(fn string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	buf := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING + 1))
	defer C.free(unsafe.Pointer(buf))
	var class C.int
	C.gc_error_string(rc, buf, &class)
	return &Error{Func: fn, Code: int(rc), Class: int(class), Msg: C.GoString(buf)}
}

// isTruncate reports whether err is MPI's "message truncated".
func isTruncate(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Class == int(C.MPI_ERR_TRUNCATE)
}

// Buffers. Small buffers (up to arenaBytes per operation, all of them
// together) are copied into C memory next to the request and, for
// outputs, back after MPI has completed the operation: for small messages
// that is cheaper than pinning, and an abandoned small operation never
// touches Go memory again. Larger buffers are handed to MPI in place,
// pinned with runtime.Pinner until MPI has completed the operation.
const arenaBytes = 1024

// request is one nonblocking MPI operation seen from Go: the C block MPI
// writes its request and status into (with the count arrays and the
// staging arena), the copies to make when it completes, and the pins on
// the Go buffers MPI uses directly.
type request struct {
	c      *C.gc_req
	ints   []C.int  // the C block's count and displacement arrays
	arena  []byte   // the C block's staging arena
	used   int      // bytes of arena handed out
	outs   []stage  // staged outputs to copy back on completion
	outBuf [2]stage // outs' storage
	pinned bool     // pin holds something
	pin    runtime.Pinner
}

// stage is an output staged in the arena: copied to dst on completion.
type stage struct {
	dst []byte
	src []byte
}

// requestPool recycles the C blocks of requests without count arrays
// (most operations), saving a malloc and a free per operation.
var requestPool struct {
	mu   sync.Mutex // protects free
	free []*request
}

const maxPooled = 64

func newRequest(nints int) (*request, error) {
	if nints == 0 {
		requestPool.mu.Lock()
		if n := len(requestPool.free); n > 0 {
			r := requestPool.free[n-1]
			requestPool.free = requestPool.free[:n-1]
			requestPool.mu.Unlock()
			return r, nil
		}
		requestPool.mu.Unlock()
	}
	c := C.gc_req_new(C.int(nints), arenaBytes)
	if c == nil {
		return nil, fmt.Errorf("comm: mpi backend: out of C memory for a request")
	}
	r := &request{c: c, arena: unsafe.Slice((*byte)(unsafe.Pointer(c.arena)), arenaBytes)}
	r.outs = r.outBuf[:0]
	if nints > 0 {
		r.ints = unsafe.Slice((*C.int)(c.ints), nints)
	}
	return r, nil
}

// in returns the address MPI reads the input b from: a staged copy, or b
// itself, pinned. It returns nil for an empty buffer (the C side then
// substitutes a valid dummy).
func (r *request) in(b []byte) unsafe.Pointer { return r.buffer(b, false) }

// out returns the address MPI writes the output b to (its current
// contents are visible to MPI too, as for a broadcast root).
func (r *request) out(b []byte) unsafe.Pointer { return r.buffer(b, true) }

func (r *request) buffer(b []byte, out bool) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	if at := (r.used + 7) &^ 7; at+len(b) <= len(r.arena) {
		staged := r.arena[at : at+len(b)]
		r.used = at + len(b)
		copy(staged, b)
		if out {
			r.outs = append(r.outs, stage{dst: b, src: staged})
		}
		return unsafe.Pointer(unsafe.SliceData(staged))
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	r.pin.Pin(p)
	r.pinned = true
	return p
}

// complete finishes a request MPI has completed (or never started):
// copies the staged outputs back when deliver is set, then unpins and
// recycles or frees the C block.
func (r *request) complete(deliver bool) {
	if deliver {
		for _, s := range r.outs {
			copy(s.dst, s.src)
		}
	}
	clear(r.outBuf[:])
	r.outs = r.outBuf[:0]
	r.used = 0
	if r.pinned {
		r.pin.Unpin()
		r.pinned = false
	}
	if r.ints == nil {
		C.gc_req_reset(r.c)
		requestPool.mu.Lock()
		if len(requestPool.free) < maxPooled {
			requestPool.free = append(requestPool.free, r)
			requestPool.mu.Unlock()
			return
		}
		requestPool.mu.Unlock()
	}
	C.free(unsafe.Pointer(r.c))
	r.c = nil
}

// release is complete without delivering outputs: for requests that
// failed or were never started.
func (r *request) release() { r.complete(false) }

// abandon gives r up while MPI may still use it: its C block is never
// reused or freed, and pinned Go buffers stay pinned (and alive) until
// MPI_Finalize has returned.
func (r *request) abandon() {
	if r.pinned {
		proc.abandon(r)
	}
}

// cint converts an element count to MPI's int.
func cint(what string, n int) (C.int, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("comm: mpi backend: %s %d is outside MPI's int range; split the operation into pieces below 2^31 elements", what, n)
	}
	return C.int(n), nil
}

// enumsMatch reports whether the C enums of mpi_shim.h number dtypes and
// ops as package backend does (for tests).
func enumsMatch() bool {
	dts := []struct {
		c C.int
		b core.DType
	}{
		{C.gcInt8, core.Int8}, {C.gcInt16, core.Int16}, {C.gcInt32, core.Int32}, {C.gcInt64, core.Int64},
		{C.gcUint8, core.Uint8}, {C.gcUint16, core.Uint16}, {C.gcUint32, core.Uint32}, {C.gcUint64, core.Uint64},
		{C.gcFloat16, core.Float16}, {C.gcBFloat16, core.BFloat16}, {C.gcFloat32, core.Float32},
		{C.gcFloat64, core.Float64}, {C.gcByte, core.Byte},
	}
	for _, d := range dts {
		if d.c != dtypeCode(d.b) {
			return false
		}
	}
	ops := []struct {
		c C.int
		b core.Op
	}{
		{C.gcSum, core.Sum}, {C.gcProd, core.Prod}, {C.gcMin, core.Min}, {C.gcMax, core.Max},
		{C.gcBAnd, core.BAnd}, {C.gcBOr, core.BOr}, {C.gcBXor, core.BXor}, {C.gcAvg, core.Avg},
	}
	for _, o := range ops {
		if o.c != opCode(o.b) {
			return false
		}
	}
	return true
}

// dtypeCode is the C side's number for dt (the same as backend's).
func dtypeCode(dt core.DType) C.int { return C.int(dt) }

// opCode is the C side's number for op (the same as backend's).
func opCode(op core.Op) C.int { return C.int(op) }

func yieldThread() { C.gc_yield() }

// reduceLocal runs the user-defined MPI op of (dt, op) over dst and src
// in this process, as MPI would: dst = op(dst, src). For tests.
func reduceLocal(dt core.DType, op core.Op, dst, src []byte) error {
	n := len(dst) / max(dt.Size(), 1)
	if len(src) != len(dst) || n == 0 {
		return fmt.Errorf("reduceLocal: bad lengths %d, %d", len(dst), len(src))
	}
	if C.gc_reduce_local(dtypeCode(dt), opCode(op), unsafe.Pointer(&src[0]), unsafe.Pointer(&dst[0]), C.int(n)) != 0 {
		return fmt.Errorf("reduceLocal: %v %v uses a predefined MPI op", dt, op)
	}
	return nil
}

// benchIallreduce runs iters two-float MPI_Iallreduce + MPI_Test loops in
// C on c's communicator (for BenchmarkOverhead).
func benchIallreduce(c *Comm, iters int) error {
	return mpiError("MPI_Iallreduce", C.gc_bench_iallreduce(c.comm, C.int(iters)))
}

// benchAllreduce runs iters two-float blocking MPI_Allreduces in C on c's
// communicator (for BenchmarkOverhead: one cgo call per operation when
// iters is 1).
func benchAllreduce(c *Comm, iters int) error {
	return mpiError("MPI_Allreduce", C.gc_bench_allreduce(c.comm, C.int(iters)))
}
