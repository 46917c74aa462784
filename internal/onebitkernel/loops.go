package onebitkernel

import "math"

// The Go loops are the definition of every kernel: the vector kernels
// (amd64) must produce the same bits, and the tests compare them. Each
// starts at element from (a multiple of 8), where a vector kernel that did
// the elements before it stopped.
//
// A product that is added to something is converted explicitly
// (float64(a*b)): the Go spec then forbids fusing it into a multiply-add,
// which arm64 and amd64 with GOAMD64=v3 would otherwise do. (The products
// here are exact anyway, squares of float32 values in float64.)

// compressGo is Compress from element from on, continuing the sum.
func compressGo(x, e []float32, bits []byte, from int, sum float64) float64 {
	for k := from / 8; k < len(bits); k++ {
		var byt byte
		for i := range 8 {
			j := 8*k + i
			b := padded(x, j) + e[j]
			sum += float64(float64(b) * float64(b))
			if !(b < 0) {
				byt |= 0x80 >> i
			}
		}
		bits[k] = byt
	}
	return sum
}

// zero is +0 held in a variable, so that padded's 0 + e[j] is an addition
// (it turns -0 into +0) that the compiler cannot fold away.
var zero float32

// padded is x[j], or +0 past the end of x (DeepSpeed's zero padding).
func padded(x []float32, j int) float32 {
	if j < len(x) {
		return x[j]
	}
	return zero
}

// signed is pos when element j's bit is set and neg when it is clear.
func signed(bits []byte, j int, pos, neg float32) float32 {
	if bits[j>>3]&(0x80>>(j&7)) != 0 {
		return pos
	}
	return neg
}

// updateErrorGo is UpdateError from element from on.
func updateErrorGo(x, e []float32, bits []byte, from int, pos, neg float32) {
	for j := from; j < len(e); j++ {
		e[j] = (padded(x, j) + e[j]) - signed(bits, j, pos, neg)
	}
}

// unpackGo is Unpack from element from on.
func unpackGo(dst []float32, bits []byte, from int, pos, neg float32) {
	for j := from; j < len(dst); j++ {
		dst[j] = signed(bits, j, pos, neg)
	}
}

// unpackAddGo is UnpackAdd from element from on.
func unpackAddGo(dst []float32, bits []byte, from int, pos, neg float32) {
	for j := from; j < len(dst); j++ {
		dst[j] += signed(bits, j, pos, neg)
	}
}

// Scale is the RMS of n values whose squares sum to sumSquares, by the
// reproducible rule of DeepSpeed's compressed all-reduce as gocomm fixes it:
// sqrt in float64, rounded to float32, then divided in float32 by
// float32(sqrt(n)).
func Scale(sumSquares float64, n int) float32 {
	return float32(math.Sqrt(sumSquares)) / float32(math.Sqrt(float64(n)))
}
