// Package onebitkernel holds the element-wise passes of the 1-bit
// error-compensated all-reduce (package onebit): [Compress] (add the error,
// sum the squares, pack the signs) and [CompressScale] (the same, giving
// the scale), [UpdateError] (the new error) and [Unpack] / [UnpackAdd]
// (signs times a scale).
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
// The all-reduce needs only the scale, float32(sqrt(S)) of the sum S
// below, divided by float32(sqrt(n)). CompressScale sums the squares in
// vector lanes, in no fixed order, and proves from a bound on how far that
// sum can be from S that S rounds to the same scale (scale.go); only when
// the bound cannot decide (about one call in 36 at 16 Mi elements, fewer
// for shorter inputs) does it form S itself, as Compress does.
//
// Compress's sum is gocomm's reproducible norm: each value widened to
// float64, squared (exactly: a float32 squared fits in float64) and added
// to a float64 sum in index order. Every kernel returns that sum's exact
// bits, so the scale does not depend on the CPU or the vector width.
// Added one after another, it is a chain of dependent float64 additions,
// one add latency per element (BenchmarkSumSquares), slower than memory.
// The vector Compress gets the same bits without the chain
// (sum_amd64.go): while the sum stays in one binade every addition rounds
// the square to a whole number of units in the sum's last place, so a
// block of squares adds up as integers in vector lanes; a square exactly
// half a unit from two integers (a tie) goes to the neighbour that makes
// the sum's unit count even, decided from the parity of the units summed
// before it; squares of float32 values can tie only in every other
// binade, where the kernel checks for ties. A block that would leave its
// binade is split at about the crossing, and a few elements there, the
// first ones while the sum is zero or subnormal, and everything after a
// NaN or an infinity run the chain. The tests compare Compress with the
// plain loop bit for bit on many kinds of input and a fuzz target, and
// check the block kernel on its own on inputs full of ties and crossings.
// On CPUs with AVX-512 (run512_amd64.go) the sum needs no blocks at all:
// one fused multiply-add per square against S0 = 2^p rounds it to units of
// the binade, the units add up as integers while a running check keeps
// the sum in its binade, and a kernel call runs until the group where the
// sum crosses into the next binade, which the chain takes; the ties of odd
// binades are found from the value's lowest set bit and decided 64 (or 32)
// at a time from a prefix XOR of the units' parities and PEXT. Ties are
// not rare: for N(0,1) data at 16 Ki elements about 1 in 20 squares is one,
// and nearly every group of 64 in an odd binade holds some, so the kernels
// decide them in every group rather than branching around them. The AVX2
// blocks remain for CPUs without AVX-512 and for sums with a NaN or an
// infinity.
// The Go loops (every other platform) run the chain: the same blocks in
// pure Go were slower than it.
//
// The kernels keep no buffer after they return, never allocate, and are
// safe to call concurrently on disjoint output buffers. Bad lengths give an
// error wrapping [ErrLength] before anything is written.
package onebitkernel
