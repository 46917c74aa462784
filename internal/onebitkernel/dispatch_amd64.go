//go:build linux && !gocomm_portable

package onebitkernel

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector kernels: AVX2 with the YMM registers saved by
// the OS (x/sys/cpu checks both). Tests switch it off to run the Go loops.
var useAVX2 = cpu.X86.HasAVX2

// hasFMA: the AVX2 kernel of the unordered sum (compressFastAVX2) adds
// the squares with fused multiply-adds.
var hasFMA = cpu.X86.HasFMA

// Each vector kernel does the longest prefix of whole bytes of signs (8
// elements) that it can; the Go loop finishes from there.

//go:noescape
func compressAVX2(x, e *float32, bits *byte, n int, sum float64) float64

//go:noescape
func compressBlockAVX2(x, e *float32, bits *byte, n int, invU float64, parity uint64) (k float64)

//go:noescape
func compressBlockEvenAVX2(x, e *float32, bits *byte, n int, invU float64) (k float64)

//go:noescape
func compressFastAVX2(x, e *float32, bits *byte, n int) float64

//go:noescape
func compressFast64AVX512(x, e *float32, bits *byte, n int) float64

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

// compress gives the index-order float64 sum of squares without an
// addition chain where it can prove the result the same: the AVX-512 run
// kernels where the CPU has them (run512_amd64.go), else
// (sum_amd64.go) the AVX2 block kernel over the elements x covers, falling back to the
// chain where it must; the Go loop adds the padding past x (DeepSpeed pads
// by less than 8N elements).
func compress(x, e []float32, bits []byte) float64 {
	n := vectorLen(x)
	var sum float64
	if useAVX512 {
		sum = sumRuns(x, e, bits, n)
	} else {
		sum = sumBlocks(x, e, bits, 0, n, 0, unitsAVX2, chainAVX2)
	}
	return compressGo(x, e, bits, n, sum)
}

// compressApprox is Compress with the squares summed in no fixed order
// (scale.go): the vector kernels (n a multiple of 32, or of 64 with
// AVX-512; the AVX2 one needs FMA) keep a partial sum per lane; the Go
// loop does the rest.
func compressApprox(x, e []float32, bits []byte) float64 {
	var n int
	var sum float64
	switch {
	case useAVX512:
		if n = len(x) &^ 63; n > 0 {
			sum = compressFast64AVX512(&x[0], &e[0], &bits[0], n)
		}
	case useAVX2 && hasFMA:
		if n = len(x) &^ 31; n > 0 {
			sum = compressFastAVX2(&x[0], &e[0], &bits[0], n)
		}
	}
	return compressApproxGo(x, e, bits, n, sum)
}

// unitsAVX2 is the AVX2 block kernel (see blockKernel): the one that
// skips the tie checks when no square can be a tie (tiesPossible).
func unitsAVX2(x, e []float32, bits []byte, i, m int, invU float64, parity uint64) float64 {
	if !tiesPossible(invU) {
		return compressBlockEvenAVX2(&x[i], &e[i], &bits[i/8], m, invU)
	}
	return compressBlockAVX2(&x[i], &e[i], &bits[i/8], m, invU, parity)
}

// chainAVX2 is the AVX2 chain (see chainKernel).
func chainAVX2(x, e []float32, bits []byte, i, m int, sum float64) float64 {
	return compressAVX2(&x[i], &e[i], &bits[i/8], m, sum)
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
