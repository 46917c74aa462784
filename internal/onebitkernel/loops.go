package onebitkernel

import "math"

// The Go loops are the definition of every kernel: the vector kernels
// (amd64) must produce the same bits, and the tests compare them.
//
// Each product that is added to something is converted explicitly
// (float32(a*b), float64(a*b)): the Go spec then forbids fusing it into a
// multiply-add, which arm64 and amd64 with GOAMD64=v3 would otherwise do.

// compressGo is Compress over all of e.
func compressGo(x, e []float32, bits []byte) float64 {
	var sum float64
	for k := range bits {
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

// padded is x[j], or +0 past the end of x (DeepSpeed's zero padding).
func padded(x []float32, j int) float32 {
	if j < len(x) {
		return x[j]
	}
	return 0
}

// updateErrorGo is UpdateError over all of e.
func updateErrorGo(x, e []float32, bits []byte, scale float32) {
	for j := range e {
		b := padded(x, j) + e[j]
		e[j] = b - float32(scale*signOf(bits, j))
	}
}

// signOf is element j's sign, +1 or -1, from MSB-first packed bits.
func signOf(bits []byte, j int) float32 {
	if bits[j>>3]&(0x80>>(j&7)) != 0 {
		return 1
	}
	return -1
}

// unpackGo is Unpack over all of dst.
func unpackGo(dst []float32, bits []byte, scale float32) {
	for j := range dst {
		dst[j] = float32(scale * signOf(bits, j))
	}
}

// unpackAddGo is UnpackAdd over all of dst.
func unpackAddGo(dst []float32, bits []byte, scale float32) {
	for j := range dst {
		dst[j] += float32(scale * signOf(bits, j))
	}
}

// Scale is the RMS of n values whose squares sum to sumSquares, by the
// reproducible rule of DeepSpeed's compressed all-reduce as gocomm fixes it:
// sqrt in float64, rounded to float32, then divided in float32 by
// float32(sqrt(n)).
func Scale(sumSquares float64, n int) float32 {
	return float32(math.Sqrt(sumSquares)) / float32(math.Sqrt(float64(n)))
}
