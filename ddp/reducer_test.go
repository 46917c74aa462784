package ddp_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/commtest"
	"github.com/gocomm/comm/internal/testkit"
)

// shapesA is a small model: gradients of assorted sizes, one empty, one
// scalar, one larger than the caps used with it.
var shapesA = [][]int{{4, 3}, {5}, {}, {0, 7}, {40}, {2, 2, 2}, {9}, {3, 1}, {70}, {6}}

// smallCaps split shapesA into several buckets.
var smallCaps = ddp.Options{FirstBucketCapBytes: 48, BucketCapBytes: 100}

// value is a small integer, so that sums and averages are exact in every
// element type and every order of addition.
func value(rank, step, i, j int) int { return (rank*7+step*3+i*5+j)%9 - 4 }

// of converts the integer x to T, by value for the half-precision types.
func of[T comm.Numeric](x int) T {
	var z T
	switch any(z).(type) {
	case comm.Float16:
		return any(comm.NewFloat16(float32(x))).(T)
	case comm.BFloat16:
		return any(comm.NewBFloat16(float32(x))).(T)
	}
	return T(x)
}

// fill sets gradient i of r to its step values (add: adds them).
func fill[T comm.Numeric](r *ddp.Reducer[T], rank, step, i int, add bool) {
	g := r.Grad(i)
	for j := range g {
		v := of[T](value(rank, step, i, j))
		if add {
			v = addT(g[j], v)
		}
		g[j] = v
	}
}

// addT adds in T, by value for the half-precision types.
func addT[T comm.Numeric](a, b T) T {
	switch x := any(a).(type) {
	case comm.Float16:
		return any(comm.NewFloat16(x.Float32() + any(b).(comm.Float16).Float32())).(T)
	case comm.BFloat16:
		return any(comm.NewBFloat16(x.Float32() + any(b).(comm.BFloat16).Float32())).(T)
	}
	return a + b
}

// backward fills and marks every gradient of r for one step: in a random
// order, from several goroutines at once.
func backward[T comm.Numeric](ctx context.Context, r *ddp.Reducer[T], rank, step int, rng *rand.Rand, add bool, skip ...int) error {
	perm := rng.Perm(r.Len())
	perm = slices.DeleteFunc(perm, func(i int) bool { return slices.Contains(skip, i) })
	const goroutines = 3
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for gr := range goroutines {
		wg.Go(func() {
			for k := gr; k < len(perm); k += goroutines {
				fill(r, rank, step, perm[k], add)
				if err := r.Ready(ctx, perm[k]); err != nil {
					errs[gr] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// naiveAverage all-reduces each gradient's values for step (summed over
// steps when accumulated) on its own, with comm.Avg: the reference.
func naiveAverage[T comm.Numeric](ctx context.Context, c *comm.Comm, shapes [][]int, steps []int, unused ...int) ([][]T, error) {
	out := make([][]T, len(shapes))
	for i, s := range shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		g := make([]T, n)
		if !slices.Contains(unused, i) {
			for j := range g {
				x := 0
				for _, st := range steps {
					x += value(c.Rank(), st, i, j)
				}
				g[j] = of[T](x)
			}
		}
		if err := comm.AllReduce(ctx, c, g, g, comm.Avg); err != nil {
			return nil, err
		}
		out[i] = g
	}
	return out, nil
}

// checkGrads compares r's gradients with want.
// stepMatchesNaive runs one synced step (a backward in rng's order, then
// Wait) and checks its gradients against a per-tensor all-reduce of the
// same values.
func stepMatchesNaive[T comm.Numeric](ctx context.Context, c *comm.Comm, r *ddp.Reducer[T], shapes [][]int, rank, step int, rng *rand.Rand) error {
	if err := backward(ctx, r, rank, step, rng, false); err != nil {
		return err
	}
	if err := r.Wait(ctx); err != nil {
		return err
	}
	want, err := naiveAverage[T](ctx, c, shapes, []int{step})
	if err != nil {
		return err
	}
	if err := checkGrads(r, want); err != nil {
		return fmt.Errorf("step %d: %v", step, err)
	}
	return nil
}

func checkGrads[T comm.Numeric](r *ddp.Reducer[T], want [][]T) error {
	for i := range want {
		if got := r.Grad(i); !slices.Equal(got, want[i]) {
			return fmt.Errorf("gradient %d %v: got %v, want %v", i, r.Shape(i), got, want[i])
		}
	}
	return nil
}

// TestReducerMatchesNaive: whatever order gradients arrive in on each
// rank, from several goroutines, the reduced gradients equal a per-tensor
// all-reduce, step after step (the rebuild included).
func TestReducerMatchesNaive(t *testing.T) {
	onEveryWorld(t, 4, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
			if err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 1))
			for step := range 3 {
				if err := stepMatchesNaive(ctx, c, r, shapesA, rank, step, rng); err != nil {
					return err
				}
			}
			return nil
		}))
	})
}

// TestGradIsBucketMemory: Grad(i) is a view of the bucket the hook gets,
// at the offset its layout says.
func TestGradIsBucketMemory(t *testing.T) {
	w, err := comm.NewLocalWorld(1, comm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	ctx := context.Background()
	r, err := ddp.New[float64](ctx, w[0], shapesA, smallCaps)
	if err != nil {
		t.Fatal(err)
	}
	var data [][]float64
	if err := r.SetHook(func(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float64]) *comm.Work {
		data = append(data, b.Data)
		return comm.StartAllReduce(ctx, c, b.Data, b.Data, comm.Avg)
	}); err != nil {
		t.Fatal(err)
	}
	// Two steps: the second runs on the rebuilt buckets.
	for range 2 {
		data = nil
		for i := range r.Len() {
			if err := r.Ready(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range r.Buckets() {
		if l.Index >= len(data) {
			if l.Len == 0 {
				continue
			}
			t.Fatalf("bucket %d never reached the hook", l.Index)
		}
		for j, g := range l.Grads {
			v := r.Grad(g)
			if len(v) == 0 {
				continue
			}
			if &v[0] != &data[l.Index][l.Offsets[j]] {
				t.Errorf("gradient %d is not at offset %d of bucket %d", g, l.Offsets[j], l.Index)
			}
			v[0] = 42
			if data[l.Index][l.Offsets[j]] != 42 {
				t.Errorf("writing gradient %d does not write bucket %d", g, l.Index)
			}
		}
	}
}

// grad is a type defined on float32, which gocomm reduces as a float32.
type grad float32

// stepsMatchNaive runs steps of a Reducer[T] on every rank of w and checks
// each against naiveAverage.
func stepsMatchNaive[T comm.Numeric](t *testing.T, w []*comm.Comm, opts ddp.Options, steps int) {
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
		r, err := ddp.New[T](ctx, c, shapesA, opts)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(rank), 2))
		for step := range steps {
			if err := stepMatchesNaive(ctx, c, r, shapesA, rank, step, rng); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestElementTypes: every kind of element type reduces like a per-tensor
// all-reduce, half precision included.
func TestElementTypes(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		t.Run("float64", func(t *testing.T) { stepsMatchNaive[float64](t, w, smallCaps, 2) })
		t.Run("int32", func(t *testing.T) { stepsMatchNaive[int32](t, w, smallCaps, 2) })
		t.Run("int", func(t *testing.T) { stepsMatchNaive[int](t, w, smallCaps, 2) })
		t.Run("float16", func(t *testing.T) { stepsMatchNaive[comm.Float16](t, w, smallCaps, 2) })
		t.Run("bfloat16", func(t *testing.T) { stepsMatchNaive[comm.BFloat16](t, w, smallCaps, 2) })
		t.Run("defined", func(t *testing.T) { stepsMatchNaive[grad](t, w, ddp.Options{}, 2) })
	})
}

// flightOps is how many operations c's world has entered and how many
// bytes it has sent, on this rank.
func flightOps(c *comm.Comm) (ops uint64, sent int64) {
	for _, fc := range c.FlightRecorder().Snapshot().Comms {
		ops += fc.Ops
		sent += fc.BytesSent
	}
	return ops, sent
}

// TestNoSyncSendsNothing: steps with SetSync(false) enter no operation
// and send no byte (the flight recorder counts every one), and the next
// synced step reduces the gradients accumulated over all of them.
func TestNoSyncSendsNothing(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
			if err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 3))
			// Twice: before the rebuild, and after it.
			for round := range 2 {
				first := round * 10
				ops, sent := flightOps(c)
				r.SetSync(false)
				r.ZeroGrad()
				for step := first; step < first+3; step++ {
					if err := backward(ctx, r, rank, step, rng, true); err != nil {
						return err
					}
					if err := r.Wait(ctx); err != nil {
						return err
					}
				}
				if o, s := flightOps(c); o != ops || s != sent {
					return fmt.Errorf("round %d: 3 steps without sync entered %d operations and sent %d bytes, want none", round, o-ops, s-sent)
				}
				r.SetSync(true)
				if err := backward(ctx, r, rank, first+3, rng, true); err != nil {
					return err
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				// The recorder does count the synced step's collectives.
				if o, s := flightOps(c); o == ops || s == sent {
					return fmt.Errorf("round %d: the flight recorder saw no operation of the synced step", round)
				}
				want, err := naiveAverage[float32](ctx, c, shapesA, []int{first, first + 1, first + 2, first + 3})
				if err != nil {
					return err
				}
				if err := checkGrads(r, want); err != nil {
					return fmt.Errorf("round %d: %v", round, err)
				}
			}
			return nil
		}))
	})
}

// TestAccumulatedCountsAsReady: a gradient marked in a no_sync step and
// not in the synced step after it is reduced with its accumulated value,
// without FindUnused.
func TestAccumulatedCountsAsReady(t *testing.T) {
	w, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
		r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(rank), 4))
		r.SetSync(false)
		if err := backward(ctx, r, rank, 0, rng, true); err != nil {
			return err
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
		r.SetSync(true)
		// Gradient 4 takes no part in the synced step.
		if err := backward(ctx, r, rank, 1, rng, true, 4); err != nil {
			return err
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
		want, err := naiveAverage[float32](ctx, c, shapesA, []int{0, 1})
		if err != nil {
			return err
		}
		// Gradient 4 holds step 0's values only.
		w4, err := naiveAverage[float32](ctx, c, shapesA, []int{0})
		if err != nil {
			return err
		}
		want[4] = w4[4]
		return checkGrads(r, want)
	}))
}

// TestOnGroups: Reducers on the two groups of a Split run at once, each
// reducing over its own group only.
func TestOnGroups(t *testing.T) {
	onEveryWorld(t, 4, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			g, err := c.Split(ctx, rank%2, rank)
			if err != nil {
				return err
			}
			r, err := ddp.New[float64](ctx, g, shapesA, smallCaps)
			if err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 12))
			for step := range 3 {
				if err := backward(ctx, r, g.Rank(), step+10*(rank%2), rng, false); err != nil {
					return err
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				want, err := naiveAverage[float64](ctx, g, shapesA, []int{step + 10*(rank%2)})
				if err != nil {
					return err
				}
				if err := checkGrads(r, want); err != nil {
					return fmt.Errorf("group %d, step %d: %v", rank%2, step, err)
				}
			}
			return nil
		}))
	})
}

// TestSetSyncDuringStep: SetSync called after a step's first Ready takes
// effect at the next step; the step under way stays as it began.
func TestSetSyncDuringStep(t *testing.T) {
	w, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
		r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
		if err != nil {
			return err
		}
		step := func(n int, toggle func()) error {
			for i := range r.Len() {
				fill(r, rank, n, i, false)
				if err := r.Ready(ctx, i); err != nil {
					return err
				}
				if i == 0 {
					toggle()
				}
			}
			return r.Wait(ctx)
		}
		// Synced, although SetSync(false) comes in the middle.
		if err := step(0, func() { r.SetSync(false) }); err != nil {
			return err
		}
		want, err := naiveAverage[float32](ctx, c, shapesA, []int{0})
		if err != nil {
			return err
		}
		if err := checkGrads(r, want); err != nil {
			return fmt.Errorf("the synced step: %v", err)
		}
		// Not synced, although SetSync(true) comes in the middle: the
		// gradients stay this rank's own.
		ops, _ := flightOps(c)
		if err := step(1, func() { r.SetSync(true) }); err != nil {
			return err
		}
		if o, _ := flightOps(c); o != ops {
			return fmt.Errorf("the local step entered %d operations", o-ops)
		}
		for i := range r.Len() {
			for j, got := range r.Grad(i) {
				if want := float32(value(rank, 1, i, j)); got != want {
					return fmt.Errorf("the local step: gradient %d [%d] is %v, want %v", i, j, got, want)
				}
			}
		}
		return nil
	}))
}

// TestEmptyBucket: a bucket of gradients with no elements needs no
// collective on any rank, and the buckets after it still start.
func TestEmptyBucket(t *testing.T) {
	shapes := [][]int{{100}, {3}, {0}, {0, 5}}
	opts := ddp.Options{FirstBucketCapBytes: 4, BucketCapBytes: 8}
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[int64](ctx, c, shapes, opts)
			if err != nil {
				return err
			}
			if l := r.Buckets()[0]; l.Len != 0 || !slices.Equal(l.Grads, []int{3, 2}) {
				return fmt.Errorf("bucket 0 is %+v, want gradients 3 and 2, no elements", l)
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 13))
			for step := range 3 {
				if err := stepMatchesNaive(ctx, c, r, shapes, rank, step, rng); err != nil {
					return err
				}
			}
			return nil
		}))
	})
}

// scaledResNet50 is ResNet-50's 161 shapes with every dimension of 64 or
// more divided by 32: the same structure, 25K elements.
func scaledResNet50() [][]int {
	var out [][]int
	for _, s := range resnet50Shapes() {
		t := make([]int, len(s))
		for i, d := range s {
			t[i] = d
			if d >= 64 {
				t[i] = d / 32
			}
		}
		out = append(out, t)
	}
	return out
}

// TestManyGradients: a model of ResNet-50's structure (161 gradients,
// dozens of buckets), its gradients marked from eight goroutines per rank
// in random orders, reduces like per-tensor all-reduces.
func TestManyGradients(t *testing.T) {
	shapes := scaledResNet50()
	opts := ddp.Options{FirstBucketCapBytes: 1 << 10, BucketCapBytes: 4 << 10}
	for _, kind := range []string{"inproc", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			w := commtest.World(t, kind, 3, comm.Options{})
			ctx := testkit.Context(t, time.Minute)
			testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
				r, err := ddp.New[float32](ctx, c, shapes, opts)
				if err != nil {
					return err
				}
				if n := len(r.Buckets()); n < 20 {
					return fmt.Errorf("%d buckets, want a few dozen", n)
				}
				rng := rand.New(rand.NewPCG(uint64(rank), 14))
				for step := range 2 {
					perm := rng.Perm(r.Len())
					const goroutines = 8
					errs := make([]error, goroutines)
					var wg sync.WaitGroup
					for gr := range goroutines {
						wg.Go(func() {
							for k := gr; k < len(perm); k += goroutines {
								fill(r, rank, step, perm[k], false)
								if errs[gr] = r.Ready(ctx, perm[k]); errs[gr] != nil {
									return
								}
							}
						})
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						return err
					}
					if err := r.Wait(ctx); err != nil {
						return err
					}
					want, err := naiveAverage[float32](ctx, c, shapes, []int{step})
					if err != nil {
						return err
					}
					if err := checkGrads(r, want); err != nil {
						return fmt.Errorf("step %d: %v", step, err)
					}
				}
				return nil
			}))
		})
	}
}
