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

// keepHook all-reduces a bucket (Avg) and copies each gradient's average
// into out, the way a hook over pooled bucket memory must leave its
// result outside the bucket.
func keepHook(out [][]float32) ddp.Hook[float32] {
	return func(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float32]) *comm.Work {
		w := comm.StartAllReduce(ctx, c, b.Data, b.Data, comm.Avg)
		return comm.StartFunc(func() error {
			if err := w.Wait(); err != nil {
				return err
			}
			for j, g := range b.Grads {
				copy(out[g], b.Data[b.Offsets[j]:])
			}
			return nil
		})
	}
}

// pooledReducer is a Reducer of shapesA over pooled buckets whose hook
// leaves the averages in the returned slices.
func pooledReducer(ctx context.Context, c *comm.Comm, buffers int) (*ddp.Reducer[float32], [][]float32, error) {
	opts := smallCaps
	opts.BucketBuffers = buffers
	r, err := ddp.New[float32](ctx, c, shapesA, opts)
	if err != nil {
		return nil, nil, err
	}
	out := make([][]float32, r.Len())
	for i := range out {
		out[i] = make([]float32, len(r.Grad(i)))
	}
	return r, out, r.SetHook(keepHook(out))
}

// TestPooledBucketsMatchNaive: with pooled bucket memory, whatever order
// gradients arrive in from several goroutines (so that buckets often hold
// buffers while others are still filling), every step's averages equal a
// per-tensor all-reduce, and every gradient starts each step at zero.
func TestPooledBucketsMatchNaive(t *testing.T) {
	onEveryWorld(t, 3, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			for _, buffers := range []int{1, 2} {
				r, out, err := pooledReducer(ctx, c, buffers)
				if err != nil {
					return err
				}
				rng := rand.New(rand.NewPCG(uint64(rank), uint64(buffers)))
				for step := range 4 {
					for i := range r.Len() {
						if g := r.Grad(i); slices.ContainsFunc(g, func(x float32) bool { return x != 0 }) {
							return fmt.Errorf("%d buffers, step %d: gradient %d lent with values %v", buffers, step, i, g)
						}
					}
					// fill adds: the values are right only if lent memory is zero.
					if err := backward(ctx, r, rank, step, rng, true); err != nil {
						return err
					}
					if err := r.Wait(ctx); err != nil {
						return err
					}
					want, err := naiveAverage[float32](ctx, c, shapesA, []int{step})
					if err != nil {
						return err
					}
					for i := range want {
						if !slices.Equal(out[i], want[i]) {
							return fmt.Errorf("%d buffers, step %d: gradient %d: got %v, want %v", buffers, step, i, out[i], want[i])
						}
					}
				}
			}
			return nil
		}))
	})
}

// TestPooledBucketMemory: gradients produced in bucket order (backward's
// order, registration reversed) need no more than the pool's buffers,
// each as long as the longest bucket, far less than the buckets' own
// memory; a view is nil once its bucket's buffer is given back, and Spare
// lends the buffers between steps only.
func TestPooledBucketMemory(t *testing.T) {
	shapes := make([][]int, 40)
	for i := range shapes {
		shapes[i] = []int{1000 + 10*i}
	}
	onEveryWorld(t, 2, func(t *testing.T, w []*comm.Comm) {
		ctx := testkit.Context(t, time.Minute)
		testkit.NoErrors(t, onEveryRank(w, func(rank int, c *comm.Comm) error {
			full, err := ddp.New[float32](ctx, c, shapes, ddp.Options{BucketCapBytes: 16 << 10, FirstBucketCapBytes: 8 << 10})
			if err != nil {
				return err
			}
			r, err := ddp.New[float32](ctx, c, shapes, ddp.Options{BucketCapBytes: 16 << 10, FirstBucketCapBytes: 8 << 10, BucketBuffers: 2})
			if err != nil {
				return err
			}
			if err := r.SetHook(func(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float32]) *comm.Work {
				return comm.StartAllReduce(ctx, c, b.Data, b.Data, comm.Sum)
			}); err != nil {
				return err
			}
			longest := 0
			for _, l := range r.Buckets() {
				longest = max(longest, l.Len)
			}
			if n := len(r.Buckets()); n < 6 {
				return fmt.Errorf("%d buckets: the test wants many", n)
			}
			for step := range 3 {
				for i := len(shapes) - 1; i >= 0; i-- {
					g := r.Grad(i)
					for j := range g {
						g[j] = float32(rank + 1)
					}
					if err := r.Ready(ctx, i); err != nil {
						return err
					}
					if r.Spare() != nil {
						return fmt.Errorf("step %d: Spare during a step is not nil", step)
					}
				}
				if err := r.Wait(ctx); err != nil {
					return err
				}
				if s := r.Spare(); len(s) != 2 || len(s[0]) != longest {
					return fmt.Errorf("step %d: Spare between steps gave %d buffers", step, len(s))
				}
				if g := r.Grad(0); len(g) != shapes[0][0] {
					return fmt.Errorf("step %d: Grad after Wait lends no buffer: %d values", step, len(g))
				}
			}
			want, got := int64(4*2*longest), r.BucketBytes()
			if got != want || 3*got > full.BucketBytes() {
				return fmt.Errorf("pooled buckets hold %d B (want 2 buffers of %d values, %d B); own memory %d B", got, longest, want, full.BucketBytes())
			}
			if rank == 0 {
				t.Logf("bucket memory: %d B pooled, %d B own", got, full.BucketBytes())
			}
			return nil
		}))
	})
}

// TestPooledViewEndsWithReduction: once a bucket's reduction is done and
// its buffer lent to another bucket, Grad of its gradients is nil for the
// rest of the step, never memory another bucket uses.
func TestPooledViewEndsWithReduction(t *testing.T) {
	w, err := comm.NewLocalWorld(1, comm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	ctx := context.Background()
	r, err := ddp.New[float32](ctx, w[0], [][]int{{8}, {8}, {8}}, ddp.Options{FirstBucketCapBytes: 32, BucketCapBytes: 32, BucketBuffers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Buckets in backward's order: gradient 2, 1, 0.
	if err := r.Ready(ctx, 2); err != nil {
		t.Fatal(err)
	}
	g1 := r.Grad(1) // waits for bucket 0's reduction and takes its buffer
	if len(g1) != 8 || r.Grad(2) != nil {
		t.Fatalf("Grad(1) has %d values, Grad(2) %v after its bucket's buffer went to gradient 1", len(g1), r.Grad(2))
	}
	for _, i := range []int{1, 0} {
		if err := r.Ready(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
