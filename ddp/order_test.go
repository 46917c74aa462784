package ddp_test

import (
	"context"
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

// recorder wraps the default hook and records the buckets it was given.
type recorder struct {
	mu      sync.Mutex // protects started
	started []int
}

func (rec *recorder) hook() ddp.Hook[float32] {
	inner := ddp.AllReduceHook[float32]()
	return func(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float32]) *comm.Work {
		rec.mu.Lock()
		rec.started = append(rec.started, b.Index)
		rec.mu.Unlock()
		return inner(ctx, c, b)
	}
}

// take returns the buckets started since the last take.
func (rec *recorder) take() []int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s := rec.started
	rec.started = nil
	return s
}

// nonEmpty is the indices of the buckets of ls that hold elements.
func nonEmpty(ls []ddp.Layout) []int {
	var ks []int
	for _, l := range ls {
		if l.Len > 0 {
			ks = append(ks, l.Index)
		}
	}
	return ks
}

// TestBucketOrder: whatever order gradients arrive in, from several
// goroutines, buckets are started in bucket order, each once per step.
func TestBucketOrder(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
			if err != nil {
				return err
			}
			var rec recorder
			if err := r.SetHook(rec.hook()); err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 11))
			for step := range 4 {
				want := nonEmpty(r.Buckets())
				if err := backward(ctx, r, rank, step, rng, false); err != nil {
					return err
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				if got := rec.take(); !slices.Equal(got, want) {
					return fmt.Errorf("step %d: buckets started in the order %v, want %v", step, got, want)
				}
			}
			return nil
		}))
	})
}

// TestReadyStartsEarly: a full bucket is started by the Ready that fills
// it once the buckets before it are full, not before and not at Wait; and
// Ready does not wait for the other ranks (rank 1 begins its step only
// after rank 0's Ready calls have all returned).
func TestReadyStartsEarly(t *testing.T) {
	onEveryWorld(t, 2, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		opts := smallCaps
		opts.KeepOrder = true
		rank0Done := make(chan struct{})
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float32](ctx, c, shapesA, opts)
			if err != nil {
				return err
			}
			var rec recorder
			if err := r.SetHook(rec.hook()); err != nil {
				return err
			}
			ls := r.Buckets()
			if len(ls) < 3 {
				return fmt.Errorf("want 3 buckets or more, got %v", ls)
			}
			mark := func(k int) error {
				for _, g := range ls[k].Grads {
					if err := r.Ready(ctx, g); err != nil {
						return err
					}
				}
				return nil
			}
			if rank == 1 {
				select {
				case <-rank0Done:
				case <-ctx.Done():
					return fmt.Errorf("rank 0's Ready calls did not all return: %w", ctx.Err())
				}
				for k := len(ls) - 1; k >= 0; k-- {
					if err := mark(k); err != nil {
						return err
					}
				}
				return r.Wait(ctx)
			}
			// Bucket 1 full, bucket 0 not: nothing starts.
			if err := mark(1); err != nil {
				return err
			}
			if got := rec.take(); len(got) != 0 {
				return fmt.Errorf("bucket 1 alone started %v", got)
			}
			// Bucket 0 full: it and bucket 1 start, in order.
			if err := mark(0); err != nil {
				return err
			}
			if got := rec.take(); !slices.Equal(got, []int{0, 1}) {
				return fmt.Errorf("filling bucket 0 after 1 started %v, want [0 1]", got)
			}
			for k := 2; k < len(ls); k++ {
				if err := mark(k); err != nil {
					return err
				}
			}
			if got, want := rec.take(), nonEmpty(ls[2:]); !slices.Equal(got, want) {
				return fmt.Errorf("the last buckets started %v, want %v", got, want)
			}
			close(rank0Done)
			return r.Wait(ctx)
		}))
	})
}
