package onebitkernel

import "math"

// The scale without the index-order sum.
//
// Only float32(sqrt(S)) of the index-order sum S reaches the wire, and
// r(v) = float32(math.Sqrt(v)) is monotone (a correctly rounded square
// root, then a rounding to float32). So a sum A of the same squares in
// another order, with a bound d on |A - S|, proves r(S) whenever
// r(A-d) == r(A+d): S lies between them.
//
// The bound. Squares of float32 values are exact in float64 and never
// subnormal, so every addition rounds by at most u = 2^-53 of its result,
// and a sum of non-negative terms in which each term passes through at
// most D additions is within γD·T of the exact total T, γD = Du/(1-Du)
// (Higham, Accuracy and Stability of Numerical Algorithms, §4.2). S has
// D = n-1. A keeps a partial sum per vector lane (64 with AVX-512, 16
// with AVX2, 4 in the Go loop), each of at most n/4 terms, and joins them
// in at most 8 more additions: D <= n/4+8. So |A - S| <= (1.25n+8)u·T
// (1+2^-18) while n <= 2^27, and d = (1.25n+16)u·A (1+2^-10) covers it.
//
// The window is 2d wide in the sum, half that relative to the root, and
// float32 roots lie 2^-24 to 2^-23 apart (relative): the proof fails, and
// the index-order sum is formed after all, for about one call in
// 2^29.5/(1.25n): one in 37 thousand at 16 Ki elements, one in 36 at
// 16 Mi. Past 2^27 elements, where it would fail one call in five, the
// index-order sum is formed at once. A sum that is not finite always
// takes the index-order path.

// maxApprox is the longest e for which the unordered sum is tried.
const maxApprox = 1 << 27

// approxError is d above: the most an unordered sum approx of n squares
// can differ from their index-order sum.
func approxError(approx float64, n int) float64 {
	return approx * ((1.25*float64(n) + 16) * 0x1p-53 * (1 + 0x1p-10))
}

// provenRoot returns r(S) for the index-order sum S of n squares whose
// sum in another order is approx, and whether the bound proves it.
func provenRoot(approx float64, n int) (float32, bool) {
	d := approxError(approx, n)
	lo, hi := float32(math.Sqrt(approx-d)), float32(math.Sqrt(approx+d))
	return lo, lo == hi // false for NaN and infinities: NaN != NaN
}

// compressScale is CompressScale after the length checks; exact reports
// whether the proof failed and the index-order sum was formed.
func compressScale(x, e []float32, bits []byte) (scale float32, exact bool) {
	n := len(e)
	if n <= maxApprox {
		if root, ok := provenRoot(compressApprox(x, e, bits), n); ok {
			return root / float32(math.Sqrt(float64(n))), false
		}
	}
	return Scale(compress(x, e, bits), n), true
}

// compressApproxGo is Compress from element from on with the squares
// added to sum in four interleaved partial sums, not in index order: the
// Go loop of compressApprox, without one addition's latency per element.
func compressApproxGo(x, e []float32, bits []byte, from int, sum float64) float64 {
	var s0, s1, s2, s3 float64
	for k := from / 8; k < len(bits); k++ {
		var byt byte
		for i := 0; i < 8; i += 4 {
			j := 8*k + i
			b0, b1 := padded(x, j)+e[j], padded(x, j+1)+e[j+1]
			b2, b3 := padded(x, j+2)+e[j+2], padded(x, j+3)+e[j+3]
			s0 += float64(float64(b0) * float64(b0))
			s1 += float64(float64(b1) * float64(b1))
			s2 += float64(float64(b2) * float64(b2))
			s3 += float64(float64(b3) * float64(b3))
			byt |= signBit(b0, i) | signBit(b1, i+1) | signBit(b2, i+2) | signBit(b3, i+3)
		}
		bits[k] = byt
	}
	return sum + ((s0 + s1) + (s2 + s3))
}

// signBit is b's bit at position i of its byte: 0x80>>i unless b < 0.
func signBit(b float32, i int) byte {
	if b < 0 {
		return 0
	}
	return 0x80 >> i
}
