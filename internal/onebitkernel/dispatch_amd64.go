//go:build linux && !gocomm_portable

package onebitkernel

import (
	"math"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the vector kernels: AVX2 with the YMM registers saved by
// the OS (x/sys/cpu checks both). Tests switch it off to run the Go loops.
var useAVX2 = cpu.X86.HasAVX2

// Each vector kernel does the longest prefix of whole bytes of signs (8
// elements) that it can; the Go loop finishes from there.

//go:noescape
func compressAVX2(x, e *float32, bits *byte, n int, sum float64) float64

//go:noescape
func compressBlockAVX2(x, e *float32, bits *byte, n int, invU float64) (k float64, ties int)

//go:noescape
func updateErrorAVX2(x, e *float32, bits *byte, n int, pos, neg float32)

//go:noescape
func unpackAVX2(dst *float32, bits *byte, n int, pos, neg float32)

//go:noescape
func unpackAddAVX2(dst *float32, bits *byte, n int, pos, neg float32)

// vectorLen is how many leading elements of x (and of e, and of the signs)
// the vector kernels take: whole bytes of signs where x has values.
func vectorLen(x []float32) int {
	if !useAVX2 {
		return 0
	}
	return len(x) &^ 7
}

// compress gives the index-order float64 sum of squares without running
// an addition per element one after another where it can prove the
// result the same.
//
// Let the running sum S be a positive normal float64 in [2^p, 2^(p+1)),
// so every float64 there is a multiple of u = 2^(p-52), S among them.
// While S + q stays below 2^(p+1), S + q rounds to the multiple of u
// nearest to it, which is S + round(q/u)*u, unless q/u is exactly halfway
// between two integers (a tie, whose rounding to even depends on S). So
// for a block of squares q_i: if none is a tie and S + Σ round(q_i/u)*u <
// 2^(p+1), the additions one after another give exactly that value (the
// sum never leaves the binade: it only grows, and rounding is monotone).
// compressBlockAVX2 computes Σ round(q_i/u) in vector lanes (integers
// below 2^53: exact in any order) and reports ties; a block that fails
// either test, and the start of the sum (S = 0, a few binades), runs the
// additions one after another (compressAVX2). Either way the bits are the
// Go loop's, which the tests check on inputs full of ties and crossings.
func compress(x, e []float32, bits []byte) float64 {
	var sum float64
	n := vectorLen(x)
	for i := 0; i < n; i += sumBlock {
		m := min(sumBlock, n-i)
		if invU, u, limit, ok := binade(sum); ok {
			k, ties := compressBlockAVX2(&x[i], &e[i], &bits[i/8], m, invU)
			if next := sum + float64(k*u); ties == 0 && next < limit {
				sum = next
				continue
			}
		}
		sum = compressAVX2(&x[i], &e[i], &bits[i/8], m, sum)
	}
	return compressGo(x, e, bits, n, sum)
}

// sumBlock is how many elements compress adds up at a time: a block that
// crosses a binade is redone one addition after another, so smaller
// blocks waste less; larger ones amortise the check.
const sumBlock = 1024

// binade returns, for a positive normal s in [2^p, 2^(p+1)), 1/u and u
// with u = 2^(p-52) its unit in the last place, and 2^(p+1); ok is false
// when s is zero, negative, subnormal, not finite, or so small or large
// that these powers of two are not normal float64 values.
func binade(s float64) (invU, u, limit float64, ok bool) {
	b := math.Float64bits(s)
	exp := b >> 52 // the biased exponent p+1023, with the sign bit above it
	if exp < 53 || exp > 2045 {
		return 0, 0, 0, false
	}
	return math.Float64frombits((2098 - exp) << 52), math.Float64frombits((exp - 52) << 52), math.Float64frombits((exp + 1) << 52), true
}

func updateError(x, e []float32, bits []byte, pos, neg float32) {
	n := vectorLen(x)
	if n > 0 {
		updateErrorAVX2(&x[0], &e[0], &bits[0], n, pos, neg)
	}
	updateErrorGo(x, e, bits, n, pos, neg)
}

func unpack(dst []float32, bits []byte, pos, neg float32) {
	n := vectorLen(dst)
	if n > 0 {
		unpackAVX2(&dst[0], &bits[0], n, pos, neg)
	}
	unpackGo(dst, bits, n, pos, neg)
}

func unpackAdd(dst []float32, bits []byte, pos, neg float32) {
	n := vectorLen(dst)
	if n > 0 {
		unpackAddAVX2(&dst[0], &bits[0], n, pos, neg)
	}
	unpackAddGo(dst, bits, n, pos, neg)
}
