package bench

import (
	"math"
	"testing"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/core"
)

// Every reduction of the pattern over the world sizes commbench runs is an
// integer (or, for avg, a ratio) that every element type holds exactly
// enough: the naive fold converted to the type and back is Expected.
func TestPatternIsExactInEveryType(t *testing.T) {
	ops := []core.Op{core.Sum, core.Prod, core.Min, core.Max, core.Avg, core.BAnd, core.BOr, core.BXor}
	for dt := core.Int8; dt < core.Byte; dt++ {
		for _, op := range ops {
			if !op.ValidFor(dt) {
				continue
			}
			maxN := 8
			if op == core.Prod && (dt == core.Int8 || dt == core.Uint8) {
				maxN = 6 // 2^7 overflows int8
			}
			for n := 1; n <= maxN; n++ {
				for i := 0; i < 4096; i++ {
					v := Expected(dt, op, n, i)
					if v != math.Trunc(v) && op != core.Avg {
						t.Fatalf("%v %v n=%d i=%d: %g is not an integer", dt, op, n, i, v)
					}
					if op != core.Avg && !exactIn(dt, v) {
						t.Fatalf("%v %v n=%d i=%d: %g is not exact in the type", dt, op, n, i, v)
					}
				}
			}
		}
	}
}

// exactIn reports whether the integer v is represented exactly by dt.
func exactIn(dt core.DType, v float64) bool {
	switch dt {
	case core.Float16:
		return math.Abs(v) <= 2048
	case core.BFloat16:
		return math.Abs(v) <= 256
	case core.Int8:
		return v >= -128 && v <= 127
	case core.Uint8:
		return v >= 0 && v <= 255
	case core.Int16:
		return v >= -32768 && v <= 32767
	case core.Uint16:
		return v >= 0 && v <= 65535
	}
	return true
}

// The pattern tells blocks apart: shifting a block by a multiple of its
// length (a block delivered to the wrong place) changes most elements.
func TestPatternCatchesMisplacedBlocks(t *testing.T) {
	for _, blk := range []int{1, 2, 8, 64, 1024} {
		same := 0
		for j := 0; j < 4096; j++ {
			if Pattern(core.Float32, core.Sum, 0, j) == Pattern(core.Float32, core.Sum, 0, j+blk) {
				same++
			}
		}
		if same > 4096/8 {
			t.Errorf("block %d: %d of 4096 elements equal their shifted selves", blk, same)
		}
	}
	if Pattern(core.Float32, core.Sum, 0, 5) == Pattern(core.Float32, core.Sum, 1, 5) {
		t.Error("ranks 0 and 1 give the same element")
	}
}

// simulate runs one case naively over n ranks in memory: prepare every
// rank's buffers, compute what the collective must leave in each recv, and
// return the checkers and buffers.
func simulate[T comm.Numeric](t *testing.T, op Op, dt core.DType, redop core.Op, n, size, root int) ([]checker[T], []bufs[T]) {
	t.Helper()
	cs := Case{Op: op, Bytes: int64(size * dt.Size()), Root: root}
	l, ok := LayoutOf(op, cs.Bytes, dt.Size(), n)
	if !ok {
		t.Fatalf("%v of %d elements does not fit %d ranks", op, size, n)
	}
	ks := make([]checker[T], n)
	bs := make([]bufs[T], n)
	for r := range n {
		ks[r] = newChecker[T](dt, redop, r, n)
		bs[r] = bufs[T]{send: make([]T, l.Send), recv: make([]T, l.Recv), l: l}
		ks[r].prepare(cs, bs[r])
	}
	el := elementOf[T]()
	conv := func(x float64) T {
		var z T
		switch any(z).(type) {
		case comm.Float16:
			return any(comm.NewFloat16(float32(x))).(T)
		case comm.BFloat16:
			return any(comm.NewBFloat16(float32(x))).(T)
		}
		return T(x)
	}
	reduce := func(idx func(r int) float64) float64 {
		acc := idx(0)
		for r := 1; r < n; r++ {
			v := idx(r)
			switch redop {
			case core.Prod:
				acc *= v
			case core.Min:
				acc = math.Min(acc, v)
			case core.Max:
				acc = math.Max(acc, v)
			default:
				acc += v
			}
		}
		if redop == core.Avg {
			acc /= float64(n)
			if dt.IsInteger() {
				acc = math.Trunc(acc)
			}
		}
		return acc
	}
	blk := l.Block
	out := make([][]T, n)
	for r := range n {
		out[r] = make([]T, l.Recv)
	}
	for r := range n {
		switch op {
		case AllReduce, Reduce:
			if op == Reduce && r != root {
				continue
			}
			for i := range out[r] {
				out[r][i] = conv(reduce(func(q int) float64 { return el.to(bs[q].send[i]) }))
			}
		case Broadcast:
			copy(out[r], bs[root].recv)
		case AllGather:
			for p := range n {
				copy(out[r][p*blk:], bs[p].send)
			}
		case ReduceScatter:
			for j := range out[r] {
				out[r][j] = conv(reduce(func(q int) float64 { return el.to(bs[q].send[r*blk+j]) }))
			}
		case AllToAll:
			for p := range n {
				copy(out[r][p*blk:(p+1)*blk], bs[p].send[r*blk:(r+1)*blk])
			}
		case SendRecv:
			copy(out[r], bs[(r+n-1)%n].send)
		case PingPong:
			if r < 2 {
				copy(out[r], bs[1-r].send)
			}
		}
	}
	for r := range n {
		if op != Barrier && !(op == Reduce && r != root) && !(op == PingPong && r >= 2) {
			copy(bs[r].recv, out[r])
		}
	}
	return ks, bs
}

func testChecker[T comm.Numeric](t *testing.T, dt core.DType) {
	for _, redop := range []core.Op{core.Sum, core.Prod, core.Min, core.Max, core.Avg} {
		for _, op := range AllOps {
			if !op.Reduces() && redop != core.Sum {
				continue
			}
			for _, n := range []int{2, 3, 4} {
				root := n - 1
				ks, bs := simulate[T](t, op, dt, redop, n, 12*n, root)
				cs := Case{Op: op, Root: root}
				for r := range n {
					if w := ks[r].count(cs, bs[r]); w != 0 {
						t.Fatalf("%v %v %v n=%d rank %d: %d wrong elements in a correct result", dt, redop, op, n, r, w)
					}
				}
				// Corrupt one element of each rank that receives.
				for r := range n {
					if op == Barrier || (op == Reduce && r != root) || (op == PingPong && r >= 2) {
						continue
					}
					i := len(bs[r].recv) - 1
					bs[r].recv[i] = ks[r].el.from(999)
					if w := ks[r].count(cs, bs[r]); w != 1 {
						t.Fatalf("%v %v %v n=%d rank %d: one corrupt element counted as %d", dt, redop, op, n, r, w)
					}
				}
			}
		}
	}
}

func TestChecker(t *testing.T) {
	testChecker[float32](t, core.Float32)
	testChecker[float64](t, core.Float64)
	testChecker[comm.Float16](t, core.Float16)
	testChecker[comm.BFloat16](t, core.BFloat16)
	testChecker[int8](t, core.Int8)
	testChecker[uint16](t, core.Uint16)
	testChecker[int64](t, core.Int64)
}

// A block delivered to the wrong rank's slot is caught.
func TestCheckerCatchesSwappedBlocks(t *testing.T) {
	ks, bs := simulate[float32](t, AllGather, core.Float32, core.Sum, 2, 64, 0)
	blk := bs[0].l.Block
	r0 := bs[0].recv
	tmp := append([]float32(nil), r0[:blk]...)
	copy(r0[:blk], r0[blk:])
	copy(r0[blk:], tmp)
	if w := ks[0].count(Case{Op: AllGather}, bs[0]); w < int64(blk) {
		t.Errorf("swapped all-gather blocks: %d wrong elements, want most of %d", w, 2*blk)
	}
}
