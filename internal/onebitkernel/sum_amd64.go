//go:build linux && !gocomm_portable

package onebitkernel

import "math"

// The sum of squares in blocks, bit for bit the index-order chain.
//
// Let the running sum S be a positive normal float64 in [2^p, 2^(p+1)):
// every float64 there is a multiple of u = 2^(p-52), and S = S'u with S'
// an integer in [2^52, 2^53). For a square t (exact in float64) with
// S + t < 2^(p+1), fl(S + t) is the multiple of u nearest to S + t, ties
// to the even multiple, so fl(S + t) = (S' + r)u where, with y = t/u
// (exact: a power-of-two scaling):
//
//   - r = round(y) when y is not an odd multiple of one half;
//   - when it is (a tie), r is floor(y) or floor(y)+1, whichever makes
//     S' + r even. It depends on S's last bit, and nothing else.
//
// A tie needs y = m^2 * 2^E (b = m * 2^e' with m an integer: every float32,
// subnormal or not, so E = 2e' - (p - 52) has p's parity) to have a 2-adic
// valuation of exactly -1, and m^2's is even: squares of float32 values
// tie only in the binades with p odd.
//
// So a block of squares needs no addition chain: a kernel forms every r
// independently, adds them as integers (exact in any order below 2^53),
// and at a tie, which is rare, looks back at the parity of S' plus the
// integers summed so far. The additions one after another stay in the
// binade exactly when S' + Σr < 2^53 (they only grow, and rounding is
// monotone), which the caller checks once per block: a block that fails
// (the sum leaves its binade, or a square is not finite) is split into a
// prefix tried again, sumLeaf elements that run the chain, and the rest. A sum that is zero, subnormal, or so small or large that u is
// not a normal float64 runs the chain too (binade's ok is false): the
// start of every sum does, until its first squares make it normal.

// Blocks are sumBlockMin elements at first and grow to 1/sumBlockGrowth
// of the elements before them, up to sumBlockMax: where the sum grows as
// the elements go by, a block then leaves its binade about once in
// sumBlockGrowth, and every refused block costs a second pass over (part
// of) it. sumLeaf is the size below which a block runs the chain instead
// of splitting again. All are multiples of 8.
const (
	sumBlockMin    = 256
	sumBlockMax    = 4096
	sumBlockGrowth = 16
	sumLeaf        = 64
)

// blockKernel forms the signs of elements [i, i+m) into bits (a refused
// block may be left partly written: the chain redoes it) and returns
// Σr for them, in units of 1/invU of a sum whose unit count S' has the
// given parity (see above), as an integer-valued float64; a value that is
// not below 2^53 - S', or not a number, means the block cannot be summed
// so (the caller checks). m is a multiple of 8.
type blockKernel func(x, e []float32, bits []byte, i, m int, invU float64, parity uint64) float64

// chainKernel forms the signs of elements [i, i+m) and continues the
// index-order sum one addition after another.
type chainKernel func(x, e []float32, bits []byte, i, m int, sum float64) float64

// sumBlocks runs elements [from, to) (multiples of 8) through block,
// falling back to chain where the units argument does not hold, and
// returns the continued sum: bit for bit the chain's.
func sumBlocks(x, e []float32, bits []byte, from, to int, sum float64, block blockKernel, chain chainKernel) float64 {
	for i := from; i < to; {
		m := min(to-i, max(sumBlockMin, min(sumBlockMax, (i/sumBlockGrowth)&^7)))
		sum = sumSplit(x, e, bits, i, m, sum, block, chain)
		i += m
	}
	return sum
}

// sumSplit is sumBlocks for one block of m elements starting at i. When
// the block kernel refuses a block because the sum would leave its binade,
// the refused k says roughly where: the prefix that stays below (in
// proportion, for evenly spread squares) is tried again as a block, at
// most half of it, then sumLeaf elements run the chain across the
// crossing, and the rest goes on as a block. A second refusal in a row
// that leaves less than a leaf (a square too large for the binade, not a
// crossing) halves the block instead, so the work stays O(m log m).
func sumSplit(x, e []float32, bits []byte, i, m int, sum float64, block blockKernel, chain chainKernel) float64 {
	short := false // the last refusal left less than a leaf to try again
	for m > 0 {
		c := 0 // the prefix to try again as a block
		if invU, u, limit, ok := binade(sum); ok {
			k := block(x, e, bits, i, m, invU, math.Float64bits(sum)&1)
			next := sum + k*u
			if next < limit {
				return next
			}
			c = m / 2
			if fit := float64(m) * ((limit - sum) / u) / k; fit < float64(c) && !short {
				c = int(fit) // k > 0 here; fit is NaN (skipped) when k is
			}
			c &^= 7
			// twice in a row: not a crossing near the start but one
			// square too large to add in units; halve the block to find it
			short = c < sumLeaf
		}
		if c >= sumLeaf {
			sum = sumSplit(x, e, bits, i, c, sum, block, chain)
			i, m = i+c, m-c
		}
		l := min(sumLeaf, m)
		sum = chain(x, e, bits, i, l, sum)
		i, m = i+l, m-l
	}
	return sum
}

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

// tiesPossible reports whether a square of a float32 can be a tie in the
// binade whose unit is 1/invU: whether p is odd, or, as invU = 2^(52-p),
// whether invU's unbiased exponent is.
func tiesPossible(invU float64) bool {
	return (math.Float64bits(invU)>>52)&1 == 0 // biased exponent 52-p+1023 even
}
