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
// to a float64 sum in index order. Every kernel returns that sum's exact
// bits, so the scale does not depend on the CPU or the vector width.
// Added one after another, it is a chain of dependent float64 additions,
// one add latency per element (BenchmarkSumSquares), slower than memory.
// The vector Compress gets the same bits without the chain where it can
// prove them equal: inside one binade of the running sum every addition
// rounds the square to a whole number of units in the last place, so a
// block of squares adds up as integers in vector lanes, unless a square is
// exactly half a unit (a tie, decided by the sum's last bit) or the sum
// leaves the binade; such blocks, and the first ones while the sum is
// small, run the chain. The tests check both paths against the Go loop,
// ties and binade crossings included. Ties are not rare: in every other
// binade of the sum about one square in a thousand is one (squares have
// an even number of trailing zero bits), so on 64 MiB of random data
// about two blocks in three still run the chain, and Compress is about
// 1.3-2x the chain's speed, not memory's. Resolving a tie inside the block
// needs only the parity of the units summed before it, a possible next
// step.
//
// The kernels keep no buffer after they return, never allocate, and are
// safe to call concurrently on disjoint output buffers. Bad lengths give an
// error wrapping [ErrLength] before anything is written.
package onebitkernel
