package bench

import (
	"math"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/core"
)

// The check pattern: element i of rank r's input is a small integer, exact
// in every element type, that depends on i through a hash (so that a block
// delivered to the wrong place is caught) and on r (so that a missing or
// doubled rank is). Reductions of these stay exact integers for the world
// sizes commbench runs; only avg of floats rounds, and is compared with a
// tolerance of the type.

// patternRange is the number of distinct input values: small for the
// narrow types, whose exact integers run out first.
func patternRange(dt comm.DType) int {
	switch dt {
	case core.Int8, core.Uint8, core.BFloat16:
		return 8
	}
	return 64
}

// Pattern is the check input of rank r at element i for elements of dt
// reduced with op.
func Pattern(dt comm.DType, op comm.ReduceOp, r, i int) int {
	h := mix32(uint32(i))
	if op == core.Prod {
		return 1 + int((h>>8)+uint32(r))%2
	}
	return 1 + int((h>>8)+uint32(3*r))%patternRange(dt)
}

// mix32 is MurmurHash3's 32-bit finaliser: every bit of x moves about
// half the bits of the result.
func mix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}

// Expected is the reduction over n ranks of element i of the pattern.
func Expected(dt comm.DType, op comm.ReduceOp, n, i int) float64 {
	acc := float64(Pattern(dt, op, 0, i))
	for r := 1; r < n; r++ {
		v := float64(Pattern(dt, op, r, i))
		switch op {
		case core.Prod:
			acc *= v
		case core.Min:
			acc = math.Min(acc, v)
		case core.Max:
			acc = math.Max(acc, v)
		case core.BAnd:
			acc = float64(int64(acc) & int64(v))
		case core.BOr:
			acc = float64(int64(acc) | int64(v))
		case core.BXor:
			acc = float64(int64(acc) ^ int64(v))
		default: // Sum, Avg
			acc += v
		}
	}
	if op == core.Avg {
		acc /= float64(n)
		if dt.IsInteger() {
			acc = math.Trunc(acc)
		}
	}
	return acc
}

// tolerance is the relative error a result of dt may carry (non-zero only
// for avg of floats, the one inexact case).
func tolerance(dt comm.DType) float64 {
	switch dt {
	case core.Float16:
		return 1e-3
	case core.BFloat16:
		return 8e-3
	case core.Float32:
		return 1e-6
	case core.Float64:
		return 1e-14
	}
	return 0
}

// element converts between T and float64, the check's common ground.
type element[T comm.Numeric] struct {
	from func(int) T
	to   func(T) float64
}

func elementOf[T comm.Numeric]() element[T] {
	var z T
	switch any(z).(type) {
	case comm.Float16:
		return element[T]{
			from: func(x int) T { return any(comm.NewFloat16(float32(x))).(T) },
			to:   func(v T) float64 { return float64(any(v).(comm.Float16).Float32()) },
		}
	case comm.BFloat16:
		return element[T]{
			from: func(x int) T { return any(comm.NewBFloat16(float32(x))).(T) },
			to:   func(v T) float64 { return float64(any(v).(comm.BFloat16).Float32()) },
		}
	}
	return element[T]{from: func(x int) T { return T(x) }, to: func(v T) float64 { return float64(v) }}
}

// checker fills inputs and counts wrong outputs for one rank.
type checker[T comm.Numeric] struct {
	el    element[T]
	dt    comm.DType
	op    comm.ReduceOp
	tol   float64
	rank  int
	ranks int
}

func newChecker[T comm.Numeric](dt comm.DType, op comm.ReduceOp, rank, ranks int) checker[T] {
	return checker[T]{el: elementOf[T](), dt: dt, op: op, tol: tolerance(dt), rank: rank, ranks: ranks}
}

// fill sets buf[j] to rank r's pattern at element off+j.
func (c checker[T]) fill(buf []T, r, off int) {
	for j := range buf {
		buf[j] = c.el.from(Pattern(c.dt, c.op, r, off+j))
	}
}

func (c checker[T]) zero(buf []T) { clear(buf) }

// wrong reports whether got differs from want beyond the type's tolerance.
func (c checker[T]) wrong(got T, want float64) bool {
	g := c.el.to(got)
	if c.tol == 0 {
		return g != want
	}
	return math.Abs(g-want) > c.tol*math.Max(1, math.Abs(want))
}

// countReduced counts the elements of buf that are not the reduction of
// the pattern at elements off+j.
func (c checker[T]) countReduced(buf []T, off int) int64 {
	var n int64
	for j, v := range buf {
		if c.wrong(v, Expected(c.dt, c.op, c.ranks, off+j)) {
			n++
		}
	}
	return n
}

// countFrom counts the elements of buf that are not rank r's pattern at
// elements off+j.
func (c checker[T]) countFrom(buf []T, r, off int) int64 {
	var n int64
	for j, v := range buf {
		if c.wrong(v, float64(Pattern(c.dt, c.op, r, off+j))) {
			n++
		}
	}
	return n
}
