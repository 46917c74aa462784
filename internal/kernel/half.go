package kernel

import (
	"math"
	"sync"

	"github.com/gocomm/comm/core"
)

// Bit layouts: binary16 is 1 sign, 5 exponent (bias 15), 10 fraction bits;
// bfloat16 is the top half of a float32 (1 sign, 8 exponent, 7 fraction bits).
const (
	f32QuietBit = 0x00400000
	f16Rebias   = (127 - 15) << 23 // float32 exponent bias minus binary16's, in place
)

// F16ToF32 widens an IEEE 754 binary16 value, given as its bit pattern, to
// float32. Every binary16 value is exactly representable, so this is exact
// for numbers, infinities and zeros; a NaN stays NaN, with its payload kept
// and made quiet.
func F16ToF32(h uint16) float32 {
	em := uint32(h & 0x7fff) // exponent and fraction
	// Normal numbers only need the exponent rebiased.
	bits := em<<13 + f16Rebias
	if em < 0x0400 { // zero or subnormal: em * 2^-24, exact in float32
		bits = math.Float32bits(float32(int32(em)) * 0x1p-24)
	}
	if em >= 0x7c00 { // infinity or NaN: exponent all ones, NaN made quiet
		bits = 0x7f800000 | em<<13
		if em != 0x7c00 {
			bits |= f32QuietBit
		}
	}
	return math.Float32frombits(uint32(h&0x8000)<<16 | bits)
}

// F32ToF16 narrows f to the nearest IEEE 754 binary16 value, ties to even,
// and returns its bit pattern. Magnitudes from 65520 up overflow to infinity,
// tiny values round to subnormals or to a zero of f's sign, and a NaN becomes
// a quiet NaN keeping the top bits of its payload.
func F32ToF16(f float32) uint16 {
	var h [1]uint16
	f32sToF16(h[:], []float32{f})
	return h[0]
}

// f16Table maps every binary16 bit pattern to its float32 value. Built on
// first use (256 KiB), it makes widening in the reduce loops one load with
// no branches, several times cheaper than F16ToF32's arithmetic.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return t
})

// widenF16 widens binary16 src into dst (len(dst) >= len(src)) by table.
func widenF16(t *[1 << 16]float32, dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = t[h]
	}
}

// f32sToF16 narrows src into binary16 dst (len(dst) >= len(src)); see
// F32ToF16. The conversion is written out here, in a loop, because it is too
// big for the compiler to inline and a call per element would cost more than
// the conversion; it has no branch on the common path, so zeros and
// subnormals mixed into normal data cost no mispredictions.
func f32sToF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		b := math.Float32bits(f)
		a := b & 0x7fffffff
		// Normal result: rebias the exponent and round the 13 dropped bits
		// to nearest even; a carry out of the fraction bumps the exponent,
		// up to infinity for 65520 <= |f| < 65536.
		normal := (a + 0x0fff + (a>>13)&1 - f16Rebias) >> 13
		// Subnormal or zero result (|f| < 2^-14): adding 0.5, whose float32
		// ulp is 2^-24 (binary16's subnormal step), makes the FPU round |f|
		// to that grid, ties to even; the low bits of the sum count steps.
		// A count of 0x400 is the smallest normal, also the right encoding.
		tiny := math.Float32bits(math.Float32frombits(a)+0.5) - 0x3f000000
		isTiny := uint32(int32(a-0x38800000) >> 31) // all ones iff |f| < 2^-14
		r := normal ^ (normal^tiny)&isTiny
		if a >= 0x47800000 { // |f| >= 65536, infinity or NaN
			r = 0x7c00
			if a > 0x7f800000 { // NaN: quiet, keep the payload's top bits
				r = 0x7e00 | (a>>13)&0x01ff
			}
		}
		dst[i] = uint16(b>>16)&0x8000 | uint16(r)
	}
}

// BF16ToF32 widens a bfloat16 value, given as its bit pattern, to float32.
// This is exact; a NaN stays NaN, with its payload kept and made quiet.
func BF16ToF32(h uint16) float32 {
	isNaN := uint32(int32(0x7f80-int32(h&0x7fff))>>31) & (f32QuietBit >> 16)
	return math.Float32frombits((uint32(h) | isNaN) << 16)
}

// F32ToBF16 narrows f to the nearest bfloat16 value, ties to even, and
// returns its bit pattern. Values beyond the largest finite bfloat16 by half
// a step or more overflow to infinity, subnormals round like normals, and a
// NaN becomes a quiet NaN keeping the top bits of its payload.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	// Round the 16 dropped bits to nearest even; a carry propagates through
	// the exponent, reaching infinity exactly when it should.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// halfBlock is how many binary16 elements reduceF16 and divideF16 widen
// into float32 stack buffers at a time.
const halfBlock = 256

// reduceF16 applies op (an arithmetic op) to binary16 elements in float32:
// blocks are widened, reduced with the float32 loops and narrowed back.
func reduceF16(op core.Op, d, s []uint16) {
	s = s[:len(d)]
	done := reduceF16Vector(op, d, s)
	d, s = d[done:], s[done:]
	var x, y [halfBlock]float32
	t := f16Table()
	for off := 0; off < len(d); off += halfBlock {
		n := min(halfBlock, len(d)-off)
		dd, ss := d[off:off+n], s[off:off+n]
		widenF16(t, x[:n], dd)
		widenF16(t, y[:n], ss)
		reduceFloat(op, x[:n], y[:n])
		f32sToF16(dd, x[:n])
	}
}

// bf16Widen is BF16ToF32 without quieting NaNs, for the reduce loops: the
// float32 operation keeps a NaN a NaN and F32ToBF16 quiets it on the way
// back, so quieting here would only cost time.
func bf16Widen(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// reduceBF16 applies op (an arithmetic op) to bfloat16 elements in float32.
func reduceBF16(op core.Op, d, s []uint16) {
	s = s[:len(d)]
	done := reduceBF16Vector(op, d, s)
	d, s = d[done:], s[done:]
	switch op {
	case core.Sum, core.Avg:
		for i := range d {
			d[i] = F32ToBF16(bf16Widen(d[i]) + bf16Widen(s[i]))
		}
	case core.Prod:
		for i := range d {
			d[i] = F32ToBF16(bf16Widen(d[i]) * bf16Widen(s[i]))
		}
	case core.Min:
		for i := range d {
			d[i] = F32ToBF16(min(bf16Widen(d[i]), bf16Widen(s[i])))
		}
	case core.Max:
		for i := range d {
			d[i] = F32ToBF16(max(bf16Widen(d[i]), bf16Widen(s[i])))
		}
	}
}

// divideF16 sets b[i] /= n for binary16 elements, dividing in float32.
func divideF16(b []uint16, n float32) {
	b = b[divideF16Vector(b, n):]
	var x [halfBlock]float32
	t := f16Table()
	for off := 0; off < len(b); off += halfBlock {
		k := min(halfBlock, len(b)-off)
		bb := b[off : off+k]
		widenF16(t, x[:k], bb)
		divideFloat(x[:k], n)
		f32sToF16(bb, x[:k])
	}
}

// divideBF16 sets b[i] /= n for bfloat16 elements, dividing in float32.
func divideBF16(b []uint16, n float32) {
	for i := range b {
		b[i] = F32ToBF16(bf16Widen(b[i]) / n)
	}
}
