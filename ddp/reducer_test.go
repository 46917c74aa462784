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
				if err := backward(ctx, r, rank, step, rng, false); err != nil {
					return err
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				want, err := naiveAverage[float32](ctx, c, shapesA, []int{step})
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
