package ddp_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/onebit"
)

// noise is a float32 in [-2, 2) that every rank can compute for every
// rank, step, gradient and element.
func noise(rank, step, i, j int) float32 {
	x := uint64(rank)<<48 ^ uint64(step)<<32 ^ uint64(i)<<20 ^ uint64(j)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float32(x>>40)/float32(1<<24)*4 - 2
}

// sparseNoise is noise on two ranks of three, and zero on the third.
func sparseNoise(rank, step, i, j int) float32 {
	if rank == (step+i+j)%3 {
		return 0
	}
	return noise(rank, step, i, j)
}

// noisyStep fills every gradient of r with values of f and marks it, in
// a random order.
func noisyStep(ctx context.Context, r *ddp.Reducer[float32], rank, step int, rng *rand.Rand, f func(rank, step, i, j int) float32) error {
	for _, i := range rng.Perm(r.Len()) {
		g := r.Grad(i)
		for j := range g {
			g[j] = f(rank, step, i, j)
		}
		if err := r.Ready(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// TestCompressHooks: FP16CompressHook and BF16CompressHook give what the
// same casts computed by hand give: each rank's value divided by the
// number of ranks (three) in float32 and rounded to 16 bits, the 16-bit
// values added in float32 and rounded, widened back. One of the three
// ranks contributes zero to each element, so that one rounded addition
// makes the result whatever order the algorithm adds in.
func TestCompressHooks(t *testing.T) {
	hooks := []struct {
		name string
		hook func() ddp.Hook[float32]
		cast func(float32) float32 // round to the 16-bit type and widen
	}{
		{"fp16", ddp.FP16CompressHook, func(x float32) float32 { return comm.NewFloat16(x).Float32() }},
		{"bf16", ddp.BF16CompressHook, func(x float32) float32 { return comm.NewBFloat16(x).Float32() }},
	}
	for _, h := range hooks {
		t.Run(h.name, func(t *testing.T) {
			onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
				ctx := testkit.Context(t, time.Minute)
				testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
					r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
					if err != nil {
						return err
					}
					if err := r.SetHook(h.hook()); err != nil {
						return err
					}
					rng := rand.New(rand.NewPCG(uint64(rank), 8))
					for step := range 3 {
						if err := noisyStep(ctx, r, rank, step, rng, sparseNoise); err != nil {
							return err
						}
						if err := r.Wait(ctx); err != nil {
							return err
						}
						for i := range r.Len() {
							for j, got := range r.Grad(i) {
								var sum float32
								for from := range 3 {
									sum = h.cast(sum + h.cast(sparseNoise(from, step, i, j)/3))
								}
								if want := sum; got != want {
									return fmt.Errorf("step %d, gradient %d [%d]: got %v, want %v", step, i, j, got, want)
								}
							}
						}
					}
					return nil
				}))
			})
		})
	}
}

// TestOnebitHook: OnebitHook gives, bit for bit, what onebit.AllReduce
// gives on each bucket's data with a state of its own per bucket kept
// across steps and started afresh when the buckets are rebuilt.
func TestOnebitHook(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
			if err != nil {
				return err
			}
			if err := r.SetHook(ddp.OnebitHook()); err != nil {
				return err
			}
			var states []*onebit.State
			epoch := 0
			rng := rand.New(rand.NewPCG(uint64(rank), 9))
			for step := range 4 {
				layout := r.Buckets() // the buckets of this step
				if err := noisyStep(ctx, r, rank, step, rng, noise); err != nil {
					return err
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				if layout[0].Epoch != epoch {
					states, epoch = nil, layout[0].Epoch
				}
				for _, l := range layout {
					if l.Len == 0 {
						continue
					}
					if len(states) <= l.Index {
						states = append(states, make([]*onebit.State, l.Index+1-len(states))...)
					}
					if states[l.Index] == nil {
						states[l.Index] = onebit.NewState(l.Len, c.Size())
					}
					buf := make([]float32, l.Len)
					for j, g := range l.Grads {
						for e := range r.Grad(g) {
							buf[l.Offsets[j]+e] = noise(rank, step, g, e)
						}
					}
					if err := onebit.AllReduce(ctx, c, buf, states[l.Index]); err != nil {
						return err
					}
					for j, g := range l.Grads {
						for e, got := range r.Grad(g) {
							if want := buf[l.Offsets[j]+e]; math.Float32bits(got) != math.Float32bits(want) {
								return fmt.Errorf("step %d, gradient %d [%d]: got %v, want %v", step, g, e, got, want)
							}
						}
					}
				}
			}
			return nil
		}))
	})
}

// TestHookFunc: a blocking hook adapted by HookFunc (a Sum, then a
// division) reduces like the default hook; its collectives stay in
// bucket order although each runs on a goroutine of its own.
func TestHookFunc(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float64](ctx, c, shapesA, smallCaps)
			if err != nil {
				return err
			}
			if err := r.SetHook(ddp.HookFunc(func(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float64]) error {
				if err := comm.AllReduce(ctx, c, b.Data, b.Data, comm.Sum); err != nil {
					return err
				}
				for i := range b.Data {
					b.Data[i] /= float64(c.Size())
				}
				return nil
			})); err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 10))
			for step := range 3 {
				if err := stepMatchesNaive(ctx, c, r, shapesA, rank, step, rng); err != nil {
					return err
				}
			}
			return nil
		}))
	})
}

// TestHookFuncErrorFailsEveryRank: a HookFunc whose function fails on one
// rank before its collective fails every rank, at once.
func TestHookFuncErrorFailsEveryRank(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		start := time.Now()
		errs := onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float64](ctx, c, shapesA, smallCaps)
			if err != nil {
				return err
			}
			if err := r.SetHook(ddp.HookFunc(func(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float64]) error {
				if c.Rank() == 2 && b.Index == 1 {
					return errors.New("bucket 1 cannot be reduced on rank 2")
				}
				return comm.AllReduce(ctx, c, b.Data, b.Data, comm.Avg)
			})); err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 15))
			if err := backward(ctx, r, rank, 0, rng, false); err != nil {
				return err
			}
			return r.Wait(ctx)
		})
		if d := time.Since(start); d > prompt {
			t.Errorf("the ranks took %v to fail", d)
		}
		for rank, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "bucket 1 cannot be reduced on rank 2") {
				t.Errorf("rank %d: %v, want the error of rank 2's hook", rank, err)
			}
		}
	})
}
