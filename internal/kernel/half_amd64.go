//go:build linux && !gocomm_portable

package kernel

import "github.com/gocomm/comm/core"

// The x86-64 kernels of binary16: F16C converts eight elements per
// instruction, exactly as widenF16 and f32sToF16 do (exact widening;
// narrowing to nearest even, NaNs made quiet with the top of their payload
// kept), and AVX adds, multiplies or divides them in float32 with the same
// rounding as Go's scalar code. Min and Max stay in Go: the vector
// instructions order NaNs and signed zeros differently from Go's min and
// max.

// hasF16C reports F16C and AVX with the OS saving the YMM registers.
var hasF16C = cpuHasF16C()

func cpuHasF16C() bool

// hasAVX2 reports AVX2 (with AVX usable, which hasF16C checks).
var hasAVX2 = hasF16C && cpuHasAVX2()

func cpuHasAVX2() bool

// bf16AddAVX2 sets d[i] += s[i] for the first n bfloat16 elements, n a
// multiple of 16, rounding as F32ToBF16.
//
//go:noescape
func bf16AddAVX2(d, s *uint16, n int)

// reduceBF16Vector reduces the longest prefix it can with the vector
// kernel (Sum and Avg) and returns how many elements it did.
func reduceBF16Vector(op core.Op, d, s []uint16) int {
	n := len(d) &^ 15
	if !hasAVX2 || n == 0 || (op != core.Sum && op != core.Avg) {
		return 0
	}
	bf16AddAVX2(&d[0], &s[0], n)
	return n
}

// f16AddAVX sets d[i] += s[i] for the first n elements, n a multiple of 16.
//
//go:noescape
func f16AddAVX(d, s *uint16, n int)

// f16MulAVX sets d[i] *= s[i] for the first n elements, n a multiple of 16.
//
//go:noescape
func f16MulAVX(d, s *uint16, n int)

// f16DivAVX sets b[i] /= x for the first n elements, n a multiple of 16.
//
//go:noescape
func f16DivAVX(b *uint16, x float32, n int)

// reduceF16Vector reduces the longest prefix it can with the vector
// kernels and returns how many elements it did.
func reduceF16Vector(op core.Op, d, s []uint16) int {
	n := len(d) &^ 15
	if !hasF16C || n == 0 {
		return 0
	}
	switch op {
	case core.Sum, core.Avg:
		f16AddAVX(&d[0], &s[0], n)
	case core.Prod:
		f16MulAVX(&d[0], &s[0], n)
	default:
		return 0
	}
	return n
}

// divideF16Vector divides the longest prefix it can and returns how many
// elements it did.
func divideF16Vector(b []uint16, x float32) int {
	n := len(b) &^ 15
	if !hasF16C || n == 0 {
		return 0
	}
	f16DivAVX(&b[0], x, n)
	return n
}
