// Package kernel holds the element-wise reduction kernels that the
// collective engine runs on every hot path: [Reduce] combines a received
// buffer into a local one, [Divide] finishes an Avg, and the half-precision
// conversions ([F16ToF32], [F32ToF16], [BF16ToF32], [F32ToBF16]) widen and
// narrow float16 and bfloat16 elements.
//
// Typical use in an engine step:
//
//	recv := kernel.Alloc(count * dt.Size()) // aligned: takes the fast path
//	// ... receive a peer's chunk into recv ...
//	if err := kernel.Reduce(dt, op, local, recv); err != nil {
//		return err
//	}
//	// after the last step of an Avg:
//	if err := kernel.Divide(dt, local, worldSize); err != nil {
//		return err
//	}
//
// # Buffers
//
// Every buffer is raw bytes holding little-endian elements of a
// [backend.DType], exactly as they travel on the wire. The kernels keep no
// buffer after they return, do not allocate (see Memory for the one
// exception), and are safe to call concurrently on disjoint buffers. dst and
// src may be the same slice but must not otherwise overlap.
//
// When a buffer starts at an address aligned for its element type and the
// host is little-endian, the kernels reinterpret the bytes in place as a
// typed slice and run unrolled loops. Otherwise they copy chunks into
// aligned stack scratch (converting byte order with encoding/binary on a
// big-endian host), reduce there and copy back: correct everywhere, and
// slower. [Alloc] returns memory that is always aligned.
//
// # Semantics
//
//   - Integers use Go's wrapping arithmetic; Divide truncates toward zero.
//   - float32 and float64 compute in their own precision (IEEE 754,
//     round-to-nearest-even).
//   - float16 and bfloat16 widen both operands to float32, apply the operator
//     in float32 and round back to nearest even.
//   - Min and Max return NaN if either operand is NaN (like torch). Otherwise
//     they compare as usual, and Min(-0, +0) is -0 while Max(-0, +0) is +0,
//     whichever operand holds which zero (Go's built-in min and max rules).
//   - A NaN result is some NaN: for float32 and float64 whichever the
//     hardware produces, for float16 and bfloat16 always a quiet one.
//   - Avg reduces like Sum; the caller divides once at the end with Divide.
//   - Bitwise operators need an integer type; nothing reduces backend.Byte.
//
// # Errors
//
// Bad input is reported, never panicked on: an operator that cannot reduce
// the type wraps [ErrUnsupported], a length problem wraps [ErrLength] and a
// divisor below 1 wraps [ErrDivisor]. On error no buffer is modified.
//
// # Memory
//
// The first float16 Reduce or Divide builds a 256 KiB table (every binary16
// value widened to float32) that later calls share; nothing else is kept.
package kernel
