//go:build !amd64 || !linux || gocomm_portable

package onebitkernel

// Without vector kernels the Go loops do everything: on every architecture
// but amd64, outside Linux, and in a gocomm_portable build.

// useAVX2 is always false here; the tests read it to skip the comparison
// of vector and Go kernels.
var useAVX2 = false

// useAVX512 is always false here too (run512_amd64.go has the kernels).
var useAVX512 = false

func compress(x, e []float32, bits []byte) float64 { return compressGo(x, e, bits, 0, 0) }

func compressApprox(x, e []float32, bits []byte) float64 { return compressApproxGo(x, e, bits, 0, 0) }

func updateError(x, e []float32, bits []byte, pos, neg float32) {
	updateErrorGo(x, e, bits, 0, pos, neg)
}

func unpack(dst []float32, bits []byte, pos, neg float32) { unpackGo(dst, bits, 0, pos, neg) }

func unpackAdd(dst []float32, bits []byte, pos, neg float32) { unpackAddGo(dst, bits, 0, pos, neg) }
