package onebitkernel

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector kernels: AVX2 with the YMM registers saved by
// the OS (x/sys/cpu checks both). Tests switch it off to run the Go loops.
var useAVX2 = cpu.X86.HasAVX2

// Each vector kernel does the longest prefix of whole bytes of signs (8
// elements) that it can; the Go loop finishes from there.

//go:noescape
func compressAVX2(x, e *float32, bits *byte, n int) float64

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

func compress(x, e []float32, bits []byte) float64 {
	var sum float64
	n := vectorLen(x)
	if n > 0 {
		sum = compressAVX2(&x[0], &e[0], &bits[0], n)
	}
	return compressGo(x, e, bits, n, sum)
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
