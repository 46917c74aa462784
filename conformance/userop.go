package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocomm/comm"
)

// User-defined ops (comm.NewOp) and PreMulSum. The reference of a
// user-defined op is its definition: the rank-ordered fold r0 ⊕ r1 ⊕ ...
// ⊕ rN-1, computed element by element with the op's own function.

// Affine is an affine map x -> m*x + c modulo 2^32, m in the high and c in
// the low 32 bits: composing maps is associative but not commutative, so
// a fold out of rank order shows in almost every element.
type Affine uint64

// composeAffine sets inout[i] to "inout[i], then in[i]".
func composeAffine(inout, in []Affine) {
	for i, a := range inout {
		b := in[i]
		ma, ca := uint32(a>>32), uint32(a)
		mb, cb := uint32(b>>32), uint32(b)
		inout[i] = Affine(mb*ma)<<32 | Affine(mb*ca+cb)
	}
}

// absSum is |a| + |b|: commutative and (on the suite's small integers)
// exactly associative.
func absSum(inout, in []Grad) {
	for i := range inout {
		inout[i] = abs(inout[i]) + abs(in[i])
	}
}

func abs(g Grad) Grad {
	if g < 0 {
		return -g
	}
	return g
}

// userOpSpec is a user-defined op and the inputs the cases feed it.
type userOpSpec[T comm.Numeric] struct {
	name        string
	commutative bool
	f           func(inout, in []T)
	input       func(r, i int) T
}

func (s userOpSpec[T]) inputs(r, off, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = s.input(r, off+i)
	}
	return out
}

// ref is the rank-ordered fold of elements off..off+n-1 over size ranks.
func (s userOpSpec[T]) ref(size, off, n int) []T {
	acc := s.inputs(0, off, n)
	for r := 1; r < size; r++ {
		s.f(acc, s.inputs(r, off, n))
	}
	return acc
}

var (
	affineOp = userOpSpec[Affine]{"affine", false, composeAffine, func(r, i int) Affine {
		h := uint32(r)*2654435761 ^ uint32(i*40503+17)
		return Affine(2*h+1)<<32 | Affine(h*7+uint32(r))
	}}
	absSumOp = userOpSpec[Grad]{"abs-sum", true, absSum, func(r, i int) Grad {
		return Grad(value(comm.Sum, false, r, i))
	}}
)

// userOpCounts: empty, one, uneven, and one over the native backend's
// lazy-copy threshold (64 KiB of Affine) that is also pipelined.
var userOpCounts = []int{0, 1, 7, 1<<13 + 5}

// userOpCases runs the affine and abs-sum ops through every reducing
// collective, and PreMulSum on three element types.
func userOpCases() []Case {
	var cs []Case
	cs = append(cs, userOpSpecCases(affineOp, userOpCounts)...)
	cs = append(cs, userOpSpecCases(absSumOp, userOpCounts)...)
	cs = append(cs, preMulSumCases[float32](-2)...)
	cs = append(cs, preMulSumCases[int32](3)...)
	cs = append(cs, preMulSumCases[comm.Float16](2)...)
	cs = append(cs, Case{"PreMulSum/float32/quarter", checkPreMulQuarter})
	return cs
}

// withOp makes s's op on c for the length of run, on a backend that runs
// user-defined ops (the refusal of the others is tested in package comm:
// it aborts the world, which would end the suite).
func withOp[T comm.Numeric](c *comm.Comm, s userOpSpec[T], run func(op comm.ReduceOp) error) error {
	if !c.Supports(comm.CapUserOps) {
		return nil
	}
	op, err := comm.NewOp(c, s.name, s.f, s.commutative)
	if err != nil {
		return err
	}
	return errors.Join(run(op), c.FreeOp(op))
}

// quickUserOpCounts are the counts of the quick suite's user-op cases,
// which every algorithm sweep runs.
var quickUserOpCounts = []int{1, 7}

func userOpSpecCases[T comm.Numeric](s userOpSpec[T], counts []int) []Case {
	var cs []Case
	name := func(what string, n int) string {
		return fmt.Sprintf("UserOp/%s(commutative=%v)/%s/n=%d", s.name, s.commutative, what, n)
	}
	for _, n := range counts {
		for _, inPlace := range []bool{false, true} {
			cs = append(cs, Case{name(fmt.Sprintf("AllReduce/inplace=%v", inPlace), n), func(ctx context.Context, c *comm.Comm) error {
				return withOp(c, s, func(op comm.ReduceOp) error {
					send := s.inputs(c.Rank(), 0, n)
					recv := send
					if !inPlace {
						recv = make([]T, n)
					}
					if err := comm.AllReduce(ctx, c, send, recv, op); err != nil {
						return err
					}
					if !inPlace {
						if err := check("send untouched", send, s.inputs(c.Rank(), 0, n)); err != nil {
							return err
						}
					}
					return check("result", recv, s.ref(c.Size(), 0, n))
				})
			}})
		}
		cs = append(cs, Case{name("Reduce", n), func(ctx context.Context, c *comm.Comm) error {
			return withOp(c, s, func(op comm.ReduceOp) error {
				for root := 0; root < c.Size(); root++ {
					var recv []T
					if c.Rank() == root {
						recv = make([]T, n)
					}
					if err := comm.Reduce(ctx, c, s.inputs(c.Rank(), 0, n), recv, op, root); err != nil {
						return err
					}
					if c.Rank() == root {
						if err := check(fmt.Sprintf("root %d", root), recv, s.ref(c.Size(), 0, n)); err != nil {
							return err
						}
					}
				}
				return nil
			})
		}})
		cs = append(cs, Case{name("ReduceScatter", n), func(ctx context.Context, c *comm.Comm) error {
			return withOp(c, s, func(op comm.ReduceOp) error {
				per := n / max(c.Size(), 1)
				recv := make([]T, per)
				if err := comm.ReduceScatter(ctx, c, s.inputs(c.Rank(), 0, per*c.Size()), recv, op); err != nil {
					return err
				}
				return check("block", recv, s.ref(c.Size(), c.Rank()*per, per))
			})
		}})
		cs = append(cs, Case{name("ReduceScatterV", n), func(ctx context.Context, c *comm.Comm) error {
			return withOp(c, s, func(op comm.ReduceOp) error {
				counts := unevenCounts(c.Size(), n)
				off := offsets(counts)
				recv := make([]T, counts[c.Rank()])
				if err := comm.ReduceScatterV(ctx, c, s.inputs(c.Rank(), 0, off[c.Size()]), recv, counts, op); err != nil {
					return err
				}
				return check("block", recv, s.ref(c.Size(), off[c.Rank()], counts[c.Rank()]))
			})
		}})
	}
	cs = append(cs, Case{name("AllReduceCoalesced+Start+Inference", 9), func(ctx context.Context, c *comm.Comm) error {
		return withOp(c, s, func(op comm.ReduceOp) error {
			a, b := s.inputs(c.Rank(), 0, 5), s.inputs(c.Rank(), 5, 4)
			if err := comm.AllReduceCoalesced(ctx, c, [][]T{a, b}, op); err != nil {
				return err
			}
			x := s.inputs(c.Rank(), 0, 9)
			w := comm.StartAllReduce(ctx, c, x, x, op)
			y := s.inputs(c.Rank(), 0, 9)
			if err := comm.InferenceAllReduce(ctx, c, y, y, op); err != nil {
				return err
			}
			if err := w.Wait(); err != nil {
				return err
			}
			want := s.ref(c.Size(), 0, 9)
			return errors.Join(check("coalesced a", a, want[:5]), check("coalesced b", b, want[5:]),
				check("started", x, want), check("inference", y, want))
		})
	}})
	return cs
}

// preMulSumCases: AllReduce (in and out of place), Reduce to the last
// rank and ReduceScatter of PreMulSum(k) over T, against k*sum.
func preMulSumCases[T comm.Numeric](k int64) []Case {
	tn := infoOf[T]().name
	u := infoOf[T]().unsigned
	want := func(size, off, n int) []T {
		return fill[T](n, func(i int) int64 { return k * reduceAcc(comm.Sum, u, size, off+i) })
	}
	in := func(r, off, n int) []T {
		return fill[T](n, func(i int) int64 { return value(comm.Sum, u, r, off+i) })
	}
	run := func(c *comm.Comm, body func(op comm.ReduceOp) error) error {
		op, err := comm.PreMulSum(c, of[T](k))
		if err != nil {
			return err
		}
		return errors.Join(body(op), c.FreeOp(op))
	}
	var cs []Case
	for _, n := range []int{0, 1, 7} {
		cs = append(cs, Case{fmt.Sprintf("PreMulSum/%s/k=%d/n=%d", tn, k, n), func(ctx context.Context, c *comm.Comm) error {
			return run(c, func(op comm.ReduceOp) error {
				send := in(c.Rank(), 0, n)
				recv := make([]T, n)
				if err := comm.AllReduce(ctx, c, send, recv, op); err != nil {
					return err
				}
				if err := errors.Join(check("out of place", recv, want(c.Size(), 0, n)), check("send untouched", send, in(c.Rank(), 0, n))); err != nil {
					return err
				}
				if err := comm.AllReduce(ctx, c, send, send, op); err != nil {
					return err
				}
				if err := check("in place", send, want(c.Size(), 0, n)); err != nil {
					return err
				}
				root := c.Size() - 1
				var rrecv []T
				if c.Rank() == root {
					rrecv = make([]T, n)
				}
				if err := comm.Reduce(ctx, c, in(c.Rank(), 0, n), rrecv, op, root); err != nil {
					return err
				}
				if c.Rank() == root {
					if err := check("reduce", rrecv, want(c.Size(), 0, n)); err != nil {
						return err
					}
				}
				block := make([]T, n)
				if err := comm.ReduceScatter(ctx, c, in(c.Rank(), 0, n*c.Size()), block, op); err != nil {
					return err
				}
				return check("reduce-scatter", block, want(c.Size(), c.Rank()*n, n))
			})
		}})
	}
	return cs
}

// checkPreMulQuarter averages the way torch's premul_sum is used for: a
// fractional scalar on float32.
func checkPreMulQuarter(ctx context.Context, c *comm.Comm) error {
	op, err := comm.PreMulSum(c, float32(0.25))
	if err != nil {
		return err
	}
	defer c.FreeOp(op)
	buf := fill[float32](9, func(i int) int64 { return value(comm.Sum, false, c.Rank(), i) })
	if err := comm.AllReduce(ctx, c, buf, buf, op); err != nil {
		return err
	}
	want := fill[float32](9, func(i int) int64 { return reduceAcc(comm.Sum, false, c.Size(), i) })
	for i := range want {
		want[i] *= 0.25
	}
	return check("quarter", buf, want)
}
