//go:build linux && !gocomm_portable

package kernel

import (
	"unsafe"

	"github.com/gocomm/comm/core"
)

// The x86-64 kernels of the 32- and 64-bit element types: AVX2 adds and
// multiplies 128 bytes per iteration, element by element, with the Go
// loops' results (IEEE operations round each element alike; integers
// wrap; a NaN where they give a NaN, whose payload, as in Go's own code,
// is that of whichever operand the instruction takes first). Min and Max
// stay in Go, as for binary16.

// addF32AVX2 and the others set d[i] = d[i] op s[i] for the first n bytes
// of d and s, n a multiple of 128.
//
//go:noescape
func addF32AVX2(d, s *byte, n int)

//go:noescape
func addF64AVX2(d, s *byte, n int)

//go:noescape
func mulF32AVX2(d, s *byte, n int)

//go:noescape
func mulF64AVX2(d, s *byte, n int)

//go:noescape
func addI32AVX2(d, s *byte, n int)

//go:noescape
func addI64AVX2(d, s *byte, n int)

//go:noescape
func mulI32AVX2(d, s *byte, n int)

// vecKernel names the pair of vector kernels (in place, and into two
// outputs around the cache) that reduce a dtype with an op.
type vecKernel uint8

const (
	noVec vecKernel = iota
	vecAddF32
	vecAddF64
	vecAddI32
	vecAddI64
	vecMulF32
	vecMulF64
	vecMulI32
)

// vecKernelOf returns the kernels for dt and op, or noVec.
func vecKernelOf(dt core.DType, op core.Op) vecKernel {
	sum, prod := op == core.Sum || op == core.Avg, op == core.Prod
	switch {
	case sum && dt == core.Float32:
		return vecAddF32
	case sum && dt == core.Float64:
		return vecAddF64
	case sum && (dt == core.Int32 || dt == core.Uint32):
		return vecAddI32
	case sum && (dt == core.Int64 || dt == core.Uint64):
		return vecAddI64
	case prod && dt == core.Float32:
		return vecMulF32
	case prod && dt == core.Float64:
		return vecMulF64
	case prod && (dt == core.Int32 || dt == core.Uint32):
		return vecMulI32
	}
	return noVec
}

// reduceVector reduces the longest prefix of dst and src (aligned to
// their element size) it has a kernel for and returns its length in
// bytes.
func reduceVector(dt core.DType, op core.Op, dst, src []byte) int {
	n := len(dst) &^ 127
	if !hasAVX2 || n == 0 {
		return 0
	}
	k := vecKernelOf(dt, op)
	// Direct calls, not a table of funcs: a call through a func value
	// makes dst and src escape (TestReduceDoesNotAllocate).
	d, p := &dst[0], &src[0]
	switch k {
	case vecAddF32:
		addF32AVX2(d, p, n)
	case vecAddF64:
		addF64AVX2(d, p, n)
	case vecAddI32:
		addI32AVX2(d, p, n)
	case vecAddI64:
		addI64AVX2(d, p, n)
	case vecMulF32:
		mulF32AVX2(d, p, n)
	case vecMulF64:
		mulF64AVX2(d, p, n)
	case vecMulI32:
		mulI32AVX2(d, p, n)
	default:
		return 0
	}
	return n
}

// addF32ToNTAVX2 and the others set d[i] = d2[i] = a[i] op b[i] for the
// first n bytes (a multiple of 128) with non-temporal stores, fenced; d
// and d2 are 32-byte aligned, a may be d.
//
//go:noescape
func addF32ToNTAVX2(d, d2, a, b *byte, n int)

//go:noescape
func addF64ToNTAVX2(d, d2, a, b *byte, n int)

//go:noescape
func mulF32ToNTAVX2(d, d2, a, b *byte, n int)

//go:noescape
func mulF64ToNTAVX2(d, d2, a, b *byte, n int)

//go:noescape
func addI32ToNTAVX2(d, d2, a, b *byte, n int)

//go:noescape
func addI64ToNTAVX2(d, d2, a, b *byte, n int)

//go:noescape
func mulI32ToNTAVX2(d, d2, a, b *byte, n int)

// reduceToNT sets d[i] = d2[i] = a[i] op b[i] with non-temporal stores for
// the longest prefix it has a kernel for (none unless d and d2 are 32-byte
// aligned) and returns its length in bytes.
func reduceToNT(dt core.DType, op core.Op, d, d2, a, b []byte) int {
	n := len(d) &^ 127
	if !hasAVX2 || n == 0 || uintptr(unsafe.Pointer(&d[0]))&31 != 0 || uintptr(unsafe.Pointer(&d2[0]))&31 != 0 {
		return 0
	}
	k := vecKernelOf(dt, op)
	pd, pd2, pa, pb := &d[0], &d2[0], &a[0], &b[0]
	switch k {
	case vecAddF32:
		addF32ToNTAVX2(pd, pd2, pa, pb, n)
	case vecAddF64:
		addF64ToNTAVX2(pd, pd2, pa, pb, n)
	case vecAddI32:
		addI32ToNTAVX2(pd, pd2, pa, pb, n)
	case vecAddI64:
		addI64ToNTAVX2(pd, pd2, pa, pb, n)
	case vecMulF32:
		mulF32ToNTAVX2(pd, pd2, pa, pb, n)
	case vecMulF64:
		mulF64ToNTAVX2(pd, pd2, pa, pb, n)
	case vecMulI32:
		mulI32ToNTAVX2(pd, pd2, pa, pb, n)
	default:
		return 0
	}
	return n
}

// copyNTAVX2 copies n bytes (a multiple of 128) to d (32-byte aligned)
// with non-temporal stores, fenced.
//
//go:noescape
func copyNTAVX2(d, s *byte, n int)

// copyNT copies the longest part of src it can into dst with
// non-temporal stores and returns where it started and ended; the
// caller copies the rest.
func copyNT(dst, src []byte) (lo, hi int) {
	if !hasAVX2 || len(dst) < 256 {
		return 0, 0
	}
	lo = int(-uintptr(unsafe.Pointer(&dst[0])) & 31)
	hi = lo + (len(dst)-lo)&^127
	if hi > lo {
		copyNTAVX2(&dst[lo], &src[lo], hi-lo)
	}
	return lo, hi
}
