package kernel

// A naive reference for the kernels, written independently of them: element
// by element, decoding with encoding/binary, integers through math/big with
// explicit truncation, floats through exact math/big arithmetic rounded once
// by big.Float's own float32/float64 conversion, and the half formats
// through float64 field arithmetic (math.Ldexp, math.RoundToEven) instead of
// bit tricks.

import (
	"encoding/binary"
	"math"
	"math/big"

	"github.com/gocomm/comm/core"
)

// halfFormat describes a 16-bit float format for the reference.
type halfFormat struct {
	name string
	mant int // fraction bits
	emin int // exponent of the smallest normal
	emax int // exponent of the largest finite value, also the bias
}

var (
	fmtF16  = halfFormat{name: "float16", mant: 10, emin: -14, emax: 15}
	fmtBF16 = halfFormat{name: "bfloat16", mant: 7, emin: -126, emax: 127}
)

func (f halfFormat) expMask() uint16  { return uint16((1<<(15-f.mant))-1) << f.mant }
func (f halfFormat) fracMask() uint16 { return 1<<f.mant - 1 }

func (f halfFormat) isNaN(h uint16) bool {
	return h&f.expMask() == f.expMask() && h&f.fracMask() != 0
}

func (f halfFormat) isQuietNaN(h uint16) bool {
	return f.isNaN(h) && h&(1<<(f.mant-1)) != 0
}

// refHalfToF64 decodes h from its fields.
func refHalfToF64(h uint16, f halfFormat) float64 {
	neg := h&0x8000 != 0
	exp := int(h&f.expMask()) >> f.mant
	frac := float64(h & f.fracMask())
	var v float64
	switch exp {
	case int(f.expMask() >> f.mant):
		if frac != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	case 0:
		v = math.Ldexp(frac, f.emin-f.mant)
	default:
		v = math.Ldexp(1+math.Ldexp(frac, -f.mant), exp-f.emax)
	}
	if neg {
		v = -v
	}
	return v
}

// refRoundHalf rounds x to the nearest value of format f, ties to even, and
// encodes it. A NaN gives the canonical quiet NaN (callers compare NaNs by
// class, not bits).
func refRoundHalf(x float64, f halfFormat) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
		x = -x
	}
	inf := sign | f.expMask()
	switch {
	case math.IsNaN(x):
		return f.expMask() | 1<<(f.mant-1)
	case math.IsInf(x, 0):
		return inf
	case x == 0:
		return sign
	}
	_, e := math.Frexp(x) // x = m * 2^e, 0.5 <= m < 1
	exp := max(e-1, f.emin)
	ulp := math.Ldexp(1, exp-f.mant)
	q := math.RoundToEven(x / ulp)
	v := q * ulp
	if v >= math.Ldexp(1, f.emax+1) {
		return inf
	}
	if v < math.Ldexp(1, f.emin) {
		return sign | uint16(q) // subnormal: the count of ulps is the fraction
	}
	_, e = math.Frexp(v)
	frac := math.Ldexp(v, -(e-1)) - 1 // in [0, 1)
	return sign | uint16(e-1+f.emax)<<f.mant | uint16(math.Ldexp(frac, f.mant))
}

func bitsOf(dt core.DType) int { return 8 * dt.Size() }

func isSigned(dt core.DType) bool {
	return dt == core.Int8 || dt == core.Int16 || dt == core.Int32 || dt == core.Int64
}

func loadUint(b []byte, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	default:
		return binary.LittleEndian.Uint64(b)
	}
}

func storeUint(b []byte, size int, v uint64) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// refLoadFloat decodes a float element of dt exactly.
func refLoadFloat(dt core.DType, b []byte) float64 {
	switch dt {
	case core.Float16:
		return refHalfToF64(binary.LittleEndian.Uint16(b), fmtF16)
	case core.BFloat16:
		return refHalfToF64(binary.LittleEndian.Uint16(b), fmtBF16)
	case core.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	default:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
}

// wrapInt truncates x to a width-bit two's-complement value and returns
// its bit pattern.
func wrapInt(x *big.Int, width int) uint64 {
	mod := new(big.Int).Lsh(big.NewInt(1), uint(width))
	r := new(big.Int).Mod(x, mod) // in [0, 2^width)
	return r.Uint64()
}

// refIntElement computes op on two integer elements of dt given as bit
// patterns, returning the result's bit pattern.
func refIntElement(dt core.DType, op core.Op, a, b uint64) uint64 {
	w := bitsOf(dt)
	toBig := func(v uint64) *big.Int {
		if isSigned(dt) && v>>(w-1)&1 == 1 { // negative: v - 2^w
			x := new(big.Int).SetUint64(v)
			return x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(w)))
		}
		return new(big.Int).SetUint64(v)
	}
	x, y := toBig(a), toBig(b)
	switch op {
	case core.Sum, core.Avg:
		return wrapInt(new(big.Int).Add(x, y), w)
	case core.Prod:
		return wrapInt(new(big.Int).Mul(x, y), w)
	case core.Min:
		if y.Cmp(x) < 0 {
			return b
		}
		return a
	case core.Max:
		if y.Cmp(x) > 0 {
			return b
		}
		return a
	case core.BAnd:
		return a & b
	case core.BOr:
		return a | b
	case core.BXor:
		return a ^ b
	}
	panic("unreachable op")
}

// refFloatOp computes x op y for an arithmetic op. Results fixed by IEEE
// rules (NaN, infinities, signed zeros) and Min/Max come back as special;
// otherwise r is the exact result, for the caller to round once.
func refFloatOp(op core.Op, x, y float64) (r *big.Float, special float64, isSpecial bool) {
	nan := math.NaN()
	if math.IsNaN(x) || math.IsNaN(y) {
		return nil, nan, true
	}
	switch op {
	case core.Sum, core.Avg:
		switch {
		case math.IsInf(x, 0) && math.IsInf(y, 0):
			if math.Signbit(x) != math.Signbit(y) {
				return nil, nan, true
			}
			return nil, x, true
		case math.IsInf(x, 0):
			return nil, x, true
		case math.IsInf(y, 0):
			return nil, y, true
		case x == 0 && y == 0:
			if math.Signbit(x) && math.Signbit(y) {
				return nil, math.Copysign(0, -1), true
			}
			return nil, 0, true
		}
		s := new(big.Float).SetPrec(2200).Add(big.NewFloat(x), big.NewFloat(y))
		if s.Sign() == 0 {
			return nil, 0, true // exact cancellation is +0 when rounding to nearest
		}
		return s, 0, false
	case core.Prod:
		neg := math.Signbit(x) != math.Signbit(y)
		signed := func(v float64) float64 {
			if neg {
				return -v
			}
			return v
		}
		switch {
		case (math.IsInf(x, 0) && y == 0) || (math.IsInf(y, 0) && x == 0):
			return nil, nan, true
		case math.IsInf(x, 0) || math.IsInf(y, 0):
			return nil, signed(math.Inf(1)), true
		case x == 0 || y == 0:
			return nil, signed(0), true
		}
		return new(big.Float).SetPrec(2200).Mul(big.NewFloat(x), big.NewFloat(y)), 0, false
	case core.Min, core.Max:
		if x == 0 && y == 0 {
			// Documented choice: Min(-0, +0) = -0 and Max(-0, +0) = +0.
			negMin := math.Signbit(x) || math.Signbit(y)
			negMax := math.Signbit(x) && math.Signbit(y)
			if op == core.Min && negMin || op == core.Max && negMax {
				return nil, math.Copysign(0, -1), true
			}
			return nil, 0, true
		}
		if (op == core.Min) == (x < y) {
			return nil, x, true
		}
		return nil, y, true
	}
	panic("unreachable op")
}

// refFloat32Op returns x op y correctly rounded to float32.
func refFloat32Op(op core.Op, x, y float64) float32 {
	r, v, special := refFloatOp(op, x, y)
	if special {
		return float32(v) // v is NaN, ±Inf, ±0 or one of the float32 operands
	}
	f, _ := r.Float32()
	return f
}

// refFloat64Op returns x op y correctly rounded to float64.
func refFloat64Op(op core.Op, x, y float64) float64 {
	r, v, special := refFloatOp(op, x, y)
	if special {
		return v
	}
	f, _ := r.Float64()
	return f
}

// refReduce computes the expected Reduce(dt, op, dst, src) into a new
// slice, one element at a time.
func refReduce(dt core.DType, op core.Op, dst, src []byte) []byte {
	size := dt.Size()
	out := make([]byte, len(dst))
	for i := 0; i < len(dst); i += size {
		a, b, o := dst[i:i+size], src[i:i+size], out[i:i+size]
		switch dt {
		case core.Float16, core.BFloat16:
			f := fmtF16
			if dt == core.BFloat16 {
				f = fmtBF16
			}
			r := refFloat32Op(op, refLoadFloat(dt, a), refLoadFloat(dt, b))
			binary.LittleEndian.PutUint16(o, refRoundHalf(float64(r), f))
		case core.Float32:
			r := refFloat32Op(op, refLoadFloat(dt, a), refLoadFloat(dt, b))
			binary.LittleEndian.PutUint32(o, math.Float32bits(r))
		case core.Float64:
			r := refFloat64Op(op, refLoadFloat(dt, a), refLoadFloat(dt, b))
			binary.LittleEndian.PutUint64(o, math.Float64bits(r))
		default:
			storeUint(o, size, refIntElement(dt, op, loadUint(a, size), loadUint(b, size)))
		}
	}
	return out
}

// refDivide computes the expected Divide(dt, buf, n) into a new slice.
func refDivide(dt core.DType, buf []byte, n int) []byte {
	size := dt.Size()
	out := make([]byte, len(buf))
	if n == 1 {
		copy(out, buf) // documented: dividing by 1 leaves buf as it is
		return out
	}
	for i := 0; i < len(buf); i += size {
		a, o := buf[i:i+size], out[i:i+size]
		if dt.IsInteger() {
			v := loadUint(a, size)
			x := new(big.Int).SetUint64(v)
			if isSigned(dt) && v>>(bitsOf(dt)-1)&1 == 1 {
				x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(bitsOf(dt))))
			}
			q := new(big.Int).Quo(x, big.NewInt(int64(n))) // truncates toward zero
			storeUint(o, size, wrapInt(q, bitsOf(dt)))
			continue
		}
		x := refLoadFloat(dt, a)
		var d float64 // the divisor in the arithmetic's precision
		if dt == core.Float64 {
			d = float64(n)
		} else {
			d = float64(float32(n))
		}
		var r float64
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0) || x == 0:
			r = x
		default:
			// 200 bits make the one rounding below correct: the quotient of
			// two short numbers is never that close to a tie without being one.
			q := new(big.Float).SetPrec(200).Quo(big.NewFloat(x), big.NewFloat(d))
			if dt == core.Float64 {
				r, _ = q.Float64()
			} else {
				f, _ := q.Float32()
				r = float64(f)
			}
		}
		switch dt {
		case core.Float16:
			binary.LittleEndian.PutUint16(o, refRoundHalf(r, fmtF16))
		case core.BFloat16:
			binary.LittleEndian.PutUint16(o, refRoundHalf(r, fmtBF16))
		case core.Float32:
			binary.LittleEndian.PutUint32(o, math.Float32bits(float32(r)))
		default:
			binary.LittleEndian.PutUint64(o, math.Float64bits(r))
		}
	}
	return out
}
