//go:build linux && !gocomm_portable

package onebitkernel

import (
	"math"

	"golang.org/x/sys/cpu"
)

// The sum of squares with AVX-512: runs of whole binades, bit for bit the
// index-order chain.
//
// sum_amd64.go shows that while the running sum S stays in its binade
// [2^p, 2^(p+1)) every addition adds r = round(t/u) units u = 2^(p-52)
// (ties to the neighbour that makes the unit count even), so a stretch of
// squares can be summed as integers. The AVX-512 kernels form those
// integers without scaling or rounding instructions: with S0 = 2^p, whose
// unit count 2^52 is even, one fused multiply-add s = fl(b*b + S0) rounds
// b*b (exact in float64) to units of u, ties to even, and as s and S0 share
// their exponent, bits(s) - bits(S0) is r as an integer. The kernels add
// those up 32 elements at a time and keep going while S' + Σr < 2^53 (the
// budget), so one call takes everything up to the group where the sum
// leaves its binade; the caller runs the chain over that group and calls
// again from the new binade. Once the sum is normal no element is done
// twice, and no blocks are guessed.
//
// Ties: a nonzero float32 is b = c*2^f with c odd, and y = t/u =
// c^2*2^(2f-p+52) is an odd multiple of 1/2 exactly when f = (p-53)/2,
// which needs p odd (even p: no ties, compressRunEvenAVX512). Then y =
// c^2/2 and, as c^2 = 1 mod 8, floor(y) is even: the fused multiply-add
// rounded the tie down, and the other neighbour is one unit up. The odd
// kernel finds the ties as the b for which h = b*2^((51-p)/2) (exact: a
// power of two, and |h| < 2^26 in a block that stays in its binade) has
// h - floor(h) = 1/2, and decides them from the parities of the units
// before them: a tie makes the count even, so the parity before a tie is
// the XOR of the parities since the last tie (or the running count's at
// the group's start), found for 32 elements at once with a carry-less
// product (prefix XOR) and PEXT/PDEP (the prefix at each tie against the
// one at the tie before it). The kernels of 64 (compressRunEven64AVX512,
// compressRunOdd64AVX512) do the bulk; kernels512_amd64.s says how they
// keep mask-register operations, their bottleneck, out of the inner work.
//
// A sum whose exponent field is 0 (zero, subnormal) or all ones, and an odd
// binade where 2^((51-p)/2) is not a normal float32 (|p| in the hundreds),
// run the chain instead; a NaN or an infinity among the squares (a sum
// from some lane outside S0's binade that the budget missed: a NaN with
// its sign bit set) makes the kernel report !ok, and the AVX2 blocks take
// the rest.

// useAVX512 selects the AVX-512 run kernels for Compress's sum, the
// kernels of this file: AVX-512 F, DQ, BW and VL, BMI2 (PEXT, PDEP,
// BLSI), POPCNT and PCLMULQDQ, with the ZMM state saved by the OS (x/sys/cpu
// checks it). Tests switch it off to run the AVX2 kernels.
var useAVX512 = useAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512VL && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT && cpu.X86.HasPCLMULQDQ

// runGroup is the AVX-512 kernels' step in elements.
const runGroup = 32

// compressRunEvenAVX512 forms the signs and the units of elements
// [0, done) of x and e from the front, n (a multiple of 32) at most, for a
// sum in a binade with p even, S0 = 2^p given by its bits s0: it stops
// before the first group of 32 whose units would bring the total k to
// budget or more. ok is false when a square was not finite (then done and
// k mean nothing, and signs may have been written).
//
//go:noescape
func compressRunEvenAVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64) (done int, k int64, ok bool)

// compressRunOddAVX512 is compressRunEvenAVX512 for p odd: hscale is
// 2^((51-p)/2) and parity the unit count's at the start (S' mod 2).
//
//go:noescape
func compressRunOddAVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64, hscale float32, parity uint64) (done int, k int64, ok bool)

// tieScale returns, for a binade with p odd given by the sum's biased
// exponent field exp = p+1023, 2^((51-p)/2) as a float32, and whether it
// is a normal float32.
func tieScale(exp uint64) (float32, bool) {
	h := (1074 - int(exp)) / 2 // (51-p)/2, exact: p odd
	if h < -126 || h > 127 {
		return 0, false
	}
	return math.Float32frombits(uint32(h+127) << 23), true
}

// sumRuns is the sum of squares and the signs of elements [0, to) (a
// multiple of 8) with the AVX-512 kernels: bit for bit the chain.
func sumRuns(x, e []float32, bits []byte, to int) float64 {
	var sum float64
	i := 0
	for to-i >= runGroup {
		s := math.Float64bits(sum)
		exp := s >> 52 // with the sign bit: a negative sum is never normal here
		if exp == 0 || exp >= 2047 {
			sum = chainAVX2(x, e, bits, i, runGroup, sum)
			i += runGroup
			continue
		}
		m := (to - i) &^ (runGroup - 1)
		budget := int64(1<<52 - s&(1<<52-1))
		var done int
		var k int64
		var ok bool
		if exp&1 == 0 { // p = exp-1023 odd: ties possible
			h, inRange := tieScale(exp)
			if !inRange {
				sum = chainAVX2(x, e, bits, i, runGroup, sum)
				i += runGroup
				continue
			}
			done, k, ok = runOdd(x, e, bits, i, m, exp<<52, budget, h, s&1)
		} else {
			done, k, ok = runEven(x, e, bits, i, m, exp<<52, budget)
		}
		if !ok {
			return sumBlocks(x, e, bits, i, to, sum, unitsAVX2, chainAVX2)
		}
		sum = math.Float64frombits(s + uint64(k))
		i += done
		if done < m { // the next group leaves the binade: the chain crosses
			sum, i = cross(x, e, bits, i, sum)
		}
	}
	if i < to {
		sum = chainAVX2(x, e, bits, i, to-i, sum)
	}
	return sum
}

// runOdd runs the odd-binade kernels over elements [i, i+m) (m a multiple
// of 32): 64 at a time (a group of 64 that does not fit is tried as its
// first 32 alone), then the 32 left over if the first did not stop. It
// returns what they return.
func runOdd(x, e []float32, bits []byte, i, m int, s0 uint64, budget int64, h float32, parity uint64) (done int, k int64, ok bool) {
	ok = true
	m64 := m &^ 63
	if m64 > 0 {
		done, k, ok = compressRunOdd64AVX512(&x[i], &e[i], &bits[i/8], m64, s0, budget, h, parity)
	}
	if ok && done == m64 && m > m64 { // 32 left over; else it stopped
		j := i + done
		d, k2, ok2 := compressRunOddAVX512(&x[j], &e[j], &bits[j/8], m-m64, s0, budget-k, h, (parity+uint64(k))&1)
		done, k, ok = done+d, k+k2, ok2
	}
	return done, k, ok
}

// runEven is runOdd for the even-binade kernels.
func runEven(x, e []float32, bits []byte, i, m int, s0 uint64, budget int64) (done int, k int64, ok bool) {
	ok = true
	m64 := m &^ 63
	if m64 > 0 {
		done, k, ok = compressRunEven64AVX512(&x[i], &e[i], &bits[i/8], m64, s0, budget)
	}
	if ok && done == m64 && m > m64 {
		j := i + done
		d, k2, ok2 := compressRunEvenAVX512(&x[j], &e[j], &bits[j/8], m-m64, s0, budget-k)
		done, k, ok = done+d, k+k2, ok2
	}
	return done, k, ok
}

// cross runs the chain from element i until the byte of signs in which
// the sum's exponent changes, runGroup elements at most (a kernel stopped
// before the group at i, which the sum leaves its binade in), in one call,
// and returns the sum and where it stopped.
func cross(x, e []float32, bits []byte, i int, sum float64) (float64, int) {
	s, done := compressCrossAVX2(&x[i], &e[i], &bits[i/8], runGroup, sum)
	return s, i + done
}

// compressCrossAVX2 is compressAVX2 over elements [0, done) of x and e,
// n (a multiple of 8) at most, stopping after the first byte of signs
// whose squares change the sum's exponent.
//
//go:noescape
func compressCrossAVX2(x, e *float32, bits *byte, n int, sum float64) (s float64, done int)

// compressRunOdd64AVX512 is compressRunOddAVX512 64 elements at a time
// (n a multiple of 64), stopping before a group of 64 that would reach the
// budget.
//
//go:noescape
func compressRunOdd64AVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64, hscale float32, parity uint64) (done int, k int64, ok bool)

// compressRunEven64AVX512 is compressRunEvenAVX512 64 elements at a time
// (n a multiple of 64), stopping before a group of 64 that would reach the
// budget.
//
//go:noescape
func compressRunEven64AVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64) (done int, k int64, ok bool)
