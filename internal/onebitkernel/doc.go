// Package onebitkernel holds the element-wise passes of the 1-bit
// error-compensated all-reduce (package onebit): [Compress] (add the error,
// sum the squares, pack the signs), [UpdateError] (the new error) and
// [Unpack] / [UnpackAdd] (signs times a scale).
//
// Signs are packed MSB first, as numpy's packbits: element 8k+i is bit 7-i
// of byte k, and the bit is 1 unless the value is < 0 (so +0, -0 and NaN
// pack as +1, as torch.sign(x)+1 > 0 does in DeepSpeed).
//
// The Go loops define the results bit for bit; on amd64 with AVX2 vector
// kernels compute the same bits faster. The sum of squares is a float64
// sum in index order, which every kernel keeps, so the result does not
// depend on the CPU.
//
// The kernels keep no buffer after they return, never allocate, and are
// safe to call concurrently on disjoint output buffers. Bad lengths give an
// error wrapping [ErrLength] before anything is written.
package onebitkernel
