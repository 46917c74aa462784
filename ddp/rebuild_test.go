package ddp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// gradOrder is every gradient's index, bucket after bucket.
func gradOrder(ls []ddp.Layout) []int {
	var out []int
	for _, l := range ls {
		out = append(out, l.Grads...)
	}
	return out
}

// TestRebuild: after the first synced step the buckets follow the order
// in which rank 0's gradients became ready (registration order here, the
// reverse of New's), on every rank whatever order its own came in; the
// gradients move with their values, and later steps stay right. With
// KeepOrder nothing moves.
func TestRebuild(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepOrder=%v", keep), func(t *testing.T) {
			opts := smallCaps
			opts.KeepOrder = keep
			onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
				ctx := testkit.Context(t, time.Minute)
				testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
					return rebuildSteps(ctx, c, opts)
				}))
			})
		})
	}
}

func rebuildSteps(ctx context.Context, c *comm.Comm, opts ddp.Options) error {
	rank := c.Rank()
	r, err := ddp.New[float32](ctx, c, shapesA, opts)
	if err != nil {
		return err
	}
	before := r.Buckets()
	if got, want := gradOrder(before), []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}; !slices.Equal(got, want) {
		return fmt.Errorf("New's buckets hold %v, want reverse registration order %v", got, want)
	}
	views := make([][]float32, r.Len())
	for i := range views {
		views[i] = r.Grad(i)
	}
	rng := rand.New(rand.NewPCG(uint64(rank), 7))
	for step := range 3 {
		if rank == 0 {
			// Registration order, one at a time.
			for i := range r.Len() {
				fill(r, rank, step, i, false)
				if err := r.Ready(ctx, i); err != nil {
					return err
				}
			}
		} else if err := backward(ctx, r, rank, step, rng, false); err != nil {
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
		after := r.Buckets()
		if opts.KeepOrder {
			if !slices.EqualFunc(after, before, sameLayout) {
				return fmt.Errorf("step %d: buckets changed with KeepOrder: %v, were %v", step, after, before)
			}
			continue
		}
		if got, want := gradOrder(after), []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
			return fmt.Errorf("step %d: rebuilt buckets hold %v, want rank 0's order %v", step, got, want)
		}
		for _, l := range after {
			if l.Epoch != 1 {
				return fmt.Errorf("step %d: bucket %d has epoch %d, want 1", step, l.Index, l.Epoch)
			}
		}
		if step == 0 {
			moved := false
			for i, v := range views {
				moved = moved || len(v) > 0 && &v[0] != &r.Grad(i)[0]
			}
			if !moved {
				return fmt.Errorf("the rebuild moved no gradient")
			}
		}
	}
	return nil
}

func sameLayout(a, b ddp.Layout) bool {
	return a.Index == b.Index && a.Len == b.Len && a.Epoch == b.Epoch &&
		slices.Equal(a.Grads, b.Grads) && slices.Equal(a.Offsets, b.Offsets)
}
