//go:build !amd64

package onebitkernel

// Without vector kernels the Go loops do everything.

func compress(x, e []float32, bits []byte) float64 { return compressGo(x, e, bits) }

func updateError(x, e []float32, bits []byte, scale float32) { updateErrorGo(x, e, bits, scale) }

func unpack(dst []float32, bits []byte, scale float32) { unpackGo(dst, bits, scale) }

func unpackAdd(dst []float32, bits []byte, scale float32) { unpackAddGo(dst, bits, scale) }
