package ddp_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// prompt bounds how long a failure may take to reach every rank: far
// below the worlds' one-minute timeout, which is what a hang would take.
const prompt = 15 * time.Second

// TestFindUnused: gradients not marked ready are reduced as zeros, even
// when garbage was written into them, and even when only some ranks
// leave them out.
func TestFindUnused(t *testing.T) {
	opts := smallCaps
	opts.FindUnused = true
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			r, err := ddp.New[float32](ctx, c, shapesA, opts)
			if err != nil {
				return err
			}
			rng := rand.New(rand.NewPCG(uint64(rank), 5))
			// Gradient 4 is unused everywhere; gradient 7 on rank 1 only,
			// which the others do use.
			skip := []int{4}
			if rank == 1 {
				skip = append(skip, 7)
			}
			for step := range 3 {
				for _, i := range skip {
					for j := range r.Grad(i) {
						r.Grad(i)[j] = 1e9
					}
				}
				if err := backward(ctx, r, rank, step, rng, false, skip...); err != nil {
					return err
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				want, err := naiveAverage[float32](ctx, c, shapesA, []int{step}, skip...)
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

// TestUnusedFailsEveryRank: without FindUnused, a rank that leaves
// gradients unmarked fails with an error naming them, and so does every
// other rank, at once instead of after the timeout.
func TestUnusedFailsEveryRank(t *testing.T) {
	for _, steps := range []int{1, 2} { // before and after the rebuild
		t.Run(fmt.Sprintf("step%d", steps), func(t *testing.T) {
			onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
				ctx := testkit.Context(t, time.Minute)
				start := time.Now()
				errs := onEveryRank(w, func(rank int, c *comm.Comm) error {
					r, err := ddp.New[float32](ctx, c, shapesA, smallCaps)
					if err != nil {
						return fmt.Errorf("New: %w", err)
					}
					rng := rand.New(rand.NewPCG(uint64(rank), 6))
					for step := range steps {
						var skip []int
						if rank == 1 && step == steps-1 {
							skip = []int{8, 2}
						}
						if err := backward(ctx, r, rank, step, rng, false, skip...); err != nil {
							return err
						}
						if err := r.Wait(ctx); err != nil {
							return err
						}
					}
					return nil
				})
				if d := time.Since(start); d > prompt {
					t.Errorf("the ranks took %v to fail", d)
				}
				// The others fail in whatever they were doing when rank 1
				// aborted the world (its abort may overtake the end of a
				// collective it had finished): the message is what counts.
				for rank, err := range errs {
					switch {
					case err == nil:
						t.Errorf("rank %d: no error", rank)
					case rank == 1 && !errors.Is(err, ddp.ErrUnused):
						t.Errorf("rank %d: %v, want ErrUnused", rank, err)
					case !strings.Contains(err.Error(), ddp.ErrUnused.Error()):
						t.Errorf("rank %d: %v, want it to say %q", rank, err, ddp.ErrUnused)
					case !strings.Contains(err.Error(), "8 [70]") || !strings.Contains(err.Error(), "2 []") || !strings.Contains(err.Error(), "rank 1"):
						t.Errorf("rank %d: %v: want gradients 8 [70] and 2 [] of rank 1 named", rank, err)
					}
				}
			})
		})
	}
}

// TestMismatchedRegistration: ranks that register different gradients
// (count, shape, element type, options, an invalid shape) all fail New at
// once with ErrMismatch naming the gradient, its shape on each rank and
// the ranks, and the communicator still works afterwards.
func TestMismatchedRegistration(t *testing.T) {
	extra := append(append([][]int{}, shapesA...), []int{3, 3})
	reshaped := append([][]int{}, shapesA...)
	reshaped[3] = []int{7, 1}
	negative := append([][]int{}, shapesA...)
	negative[5] = []int{2, -2}
	cases := []struct {
		name  string
		new   func(ctx context.Context, c *comm.Comm) error
		wants []string
	}{
		{"count", func(ctx context.Context, c *comm.Comm) error {
			s := shapesA
			if c.Rank() == 2 {
				s = extra
			}
			_, err := ddp.New[float32](ctx, c, s, ddp.Options{})
			return err
		}, []string{"gradient count: 10 on ranks 0-1, 11 on rank 2", "gradient 10: missing on ranks 0-1, shape [3 3] on rank 2"}},
		{"shape", func(ctx context.Context, c *comm.Comm) error {
			s := shapesA
			if c.Rank() == 1 {
				s = reshaped
			}
			_, err := ddp.New[float32](ctx, c, s, ddp.Options{})
			return err
		}, []string{"gradient 3: shape [0 7] on ranks 0, 2, shape [7 1] on rank 1"}},
		{"dtype", func(ctx context.Context, c *comm.Comm) error {
			var err error
			if c.Rank() == 0 {
				_, err = ddp.New[float64](ctx, c, shapesA, ddp.Options{})
			} else {
				_, err = ddp.New[float32](ctx, c, shapesA, ddp.Options{})
			}
			return err
		}, []string{"element type: float32 on ranks 1-2, float64 on rank 0"}},
		{"options", func(ctx context.Context, c *comm.Comm) error {
			_, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{FindUnused: c.Rank() == 2})
			return err
		}, []string{"Options.FindUnused: false on ranks 0-1, true on rank 2"}},
		{"negative", func(ctx context.Context, c *comm.Comm) error {
			s := shapesA
			if c.Rank() == 2 {
				s = negative
			}
			_, err := ddp.New[float32](ctx, c, s, ddp.Options{})
			return err
		}, []string{"rank 2: gradient 5 [2 -2]: dimension -2 is negative", "gradient 5: shape [2 2 2] on ranks 0-1, shape [2 -2] on rank 2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
				ctx := testkit.Context(t, time.Minute)
				start := time.Now()
				errs := onEveryRank(w, func(rank int, c *comm.Comm) error { return tc.new(ctx, c) })
				if d := time.Since(start); d > prompt {
					t.Errorf("the ranks took %v to fail", d)
				}
				for rank, err := range errs {
					if !errors.Is(err, ddp.ErrMismatch) {
						t.Errorf("rank %d: %v, want ErrMismatch", rank, err)
						continue
					}
					for _, want := range tc.wants {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("rank %d: %v\nwant it to say %q", rank, err, want)
						}
					}
				}
				// The communicator is still usable.
				testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
					_, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{})
					return err
				}))
			})
		})
	}
}
