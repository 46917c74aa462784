// Package onebitkernel holds the element-wise passes of the 1-bit
// error-compensated all-reduce (package onebit): [Compress] (add the error,
// sum the squares, pack the signs), [UpdateError] (the new error) and
// [Unpack] / [UnpackAdd] (signs times a scale).
//
// Signs are packed MSB first, as numpy's packbits: element 8k+i is bit 7-i
// of byte k, and the bit is 1 unless the value is < 0 (so +0, -0 and NaN
// pack as +1, as torch.sign(x)+1 > 0 does in DeepSpeed).
//
// The Go loops (loops.go) define the results bit for bit; on amd64 with
// AVX2 the vector kernels (kernels_amd64.s) compute the same bits, and the
// Go loops finish the tails. NaN payloads aside: when both operands of an
// addition are NaN, which payload survives is the hardware's (and the
// compiler's) choice, in DeepSpeed too.
//
// # The sum of squares
//
// Compress's sum is gocomm's reproducible norm: each value widened to
// float64, squared (exactly: a float32 squared fits in float64) and added
// to a float64 sum in index order. Every kernel keeps that order, so the
// scale does not depend on the CPU or the vector width. The price is a
// chain of dependent float64 additions, one add latency per element: the
// vector Compress squares, packs and adds the error in 8 lanes, but runs
// the additions one after another, and its speed is that chain's
// (BenchmarkSumSquares), not memory's. A sum in a fixed number of lanes
// would be reproducible too and several times faster, but it is a
// different number: changing the definition is a decision for every
// gocomm rank at once, not a kernel's.
//
// The kernels keep no buffer after they return, never allocate, and are
// safe to call concurrently on disjoint output buffers. Bad lengths give an
// error wrapping [ErrLength] before anything is written.
package onebitkernel
