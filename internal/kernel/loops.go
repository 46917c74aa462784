package kernel

import (
	"unsafe"

	"github.com/gocomm/comm/core"
)

// integer is every Go integer type a core.DType maps to.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// signed and unsigned split integer for division, whose range checks differ.
type (
	signed interface {
		~int8 | ~int16 | ~int32 | ~int64
	}
	unsigned interface {
		~uint8 | ~uint16 | ~uint32 | ~uint64
	}
)

// float is every Go floating-point type a core.DType maps to.
type float interface{ ~float32 | ~float64 }

// number is every type the arithmetic loops run on.
type number interface{ integer | float }

// blockLen is the unroll factor of the loops below: eight independent
// element operations per iteration with one bounds check.
const blockLen = 8

// blocks views the first len(x)/blockLen*blockLen elements of x as blocks.
func blocks[T any](x []T) [][blockLen]T {
	if len(x) < blockLen {
		// Converting the pointer to *[blockLen]T would claim memory beyond
		// x, which checkptr (-race) rejects even for zero blocks.
		return nil
	}
	return unsafe.Slice((*[blockLen]T)(unsafe.Pointer(unsafe.SliceData(x))), len(x)/blockLen)
}

// reduceInteger applies op (valid for integers) element-wise: d[i] = op(d[i], s[i]).
func reduceInteger[T integer](op core.Op, d, s []T) {
	switch op {
	case core.Sum, core.Avg:
		addLoop(d, s)
	case core.Prod:
		mulLoop(d, s)
	case core.Min:
		minLoop(d, s)
	case core.Max:
		maxLoop(d, s)
	case core.BAnd:
		andLoop(d, s)
	case core.BOr:
		orLoop(d, s)
	case core.BXor:
		xorLoop(d, s)
	}
}

// reduceFloat applies op (an arithmetic op) element-wise: d[i] = op(d[i], s[i]).
func reduceFloat[T float](op core.Op, d, s []T) {
	switch op {
	case core.Sum, core.Avg:
		addLoop(d, s)
	case core.Prod:
		mulLoop(d, s)
	case core.Min:
		minLoop(d, s)
	case core.Max:
		maxLoop(d, s)
	}
}

// divideSigned sets b[i] /= n (n >= 1), truncating toward zero. A divisor
// that fits in T divides in T; a larger one divides in 64 bits, where it is
// still exact (int8(-128) / 128 == -1).
func divideSigned[T signed](b []T, n int) {
	if m := T(n); int(m) == n {
		for i := range b {
			b[i] /= m
		}
		return
	}
	m := int64(n)
	for i := range b {
		b[i] = T(int64(b[i]) / m)
	}
}

// divideUnsigned sets b[i] /= n (n >= 1), truncating.
func divideUnsigned[T unsigned](b []T, n int) {
	if m := T(n); uint64(m) == uint64(n) {
		for i := range b {
			b[i] /= m
		}
		return
	}
	clear(b) // n exceeds every value of T
}

// divideFloat sets b[i] /= n in T's own precision.
func divideFloat[T float](b []T, n T) {
	for i := range b {
		b[i] /= n
	}
}

// addLoop sets d[i] += s[i] (wrapping for integers, IEEE for floats).
func addLoop[T number](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] += y[0]
		x[1] += y[1]
		x[2] += y[2]
		x[3] += y[3]
		x[4] += y[4]
		x[5] += y[5]
		x[6] += y[6]
		x[7] += y[7]
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] += s[i]
	}
}

// mulLoop sets d[i] *= s[i] (wrapping for integers, IEEE for floats).
func mulLoop[T number](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] *= y[0]
		x[1] *= y[1]
		x[2] *= y[2]
		x[3] *= y[3]
		x[4] *= y[4]
		x[5] *= y[5]
		x[6] *= y[6]
		x[7] *= y[7]
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] *= s[i]
	}
}

// minLoop sets d[i] = min(d[i], s[i]) with the built-in min: NaN wins, and -0 is below +0.
func minLoop[T number](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] = min(x[0], y[0])
		x[1] = min(x[1], y[1])
		x[2] = min(x[2], y[2])
		x[3] = min(x[3], y[3])
		x[4] = min(x[4], y[4])
		x[5] = min(x[5], y[5])
		x[6] = min(x[6], y[6])
		x[7] = min(x[7], y[7])
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] = min(d[i], s[i])
	}
}

// maxLoop sets d[i] = max(d[i], s[i]) with the built-in max: NaN wins, and +0 is above -0.
func maxLoop[T number](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] = max(x[0], y[0])
		x[1] = max(x[1], y[1])
		x[2] = max(x[2], y[2])
		x[3] = max(x[3], y[3])
		x[4] = max(x[4], y[4])
		x[5] = max(x[5], y[5])
		x[6] = max(x[6], y[6])
		x[7] = max(x[7], y[7])
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] = max(d[i], s[i])
	}
}

// andLoop sets d[i] &= s[i].
func andLoop[T integer](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] &= y[0]
		x[1] &= y[1]
		x[2] &= y[2]
		x[3] &= y[3]
		x[4] &= y[4]
		x[5] &= y[5]
		x[6] &= y[6]
		x[7] &= y[7]
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] &= s[i]
	}
}

// orLoop sets d[i] |= s[i].
func orLoop[T integer](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] |= y[0]
		x[1] |= y[1]
		x[2] |= y[2]
		x[3] |= y[3]
		x[4] |= y[4]
		x[5] |= y[5]
		x[6] |= y[6]
		x[7] |= y[7]
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] |= s[i]
	}
}

// xorLoop sets d[i] ^= s[i].
func xorLoop[T integer](d, s []T) {
	s = s[:len(d)]
	db, sb := blocks(d), blocks(s)
	sb = sb[:len(db)]
	for i := range db {
		x, y := &db[i], &sb[i]
		x[0] ^= y[0]
		x[1] ^= y[1]
		x[2] ^= y[2]
		x[3] ^= y[3]
		x[4] ^= y[4]
		x[5] ^= y[5]
		x[6] ^= y[6]
		x[7] ^= y[7]
	}
	for i := len(db) * blockLen; i < len(d); i++ {
		d[i] ^= s[i]
	}
}
