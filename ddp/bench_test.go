package ddp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// resnet50Shapes are the parameter shapes of ResNet-50 (torchvision), in
// registration order: 161 tensors, 25.6M elements.
func resnet50Shapes() [][]int {
	shapes := [][]int{{64, 3, 7, 7}, {64}, {64}}
	bn := func(c int) { shapes = append(shapes, []int{c}, []int{c}) }
	in := 64
	for _, layer := range []struct{ blocks, width int }{{3, 64}, {4, 128}, {6, 256}, {3, 512}} {
		w := layer.width
		for b := range layer.blocks {
			shapes = append(shapes, []int{w, in, 1, 1})
			bn(w)
			shapes = append(shapes, []int{w, w, 3, 3})
			bn(w)
			shapes = append(shapes, []int{4 * w, w, 1, 1})
			bn(4 * w)
			if b == 0 {
				shapes = append(shapes, []int{4 * w, in, 1, 1})
				bn(4 * w)
			}
			in = 4 * w
		}
	}
	return append(shapes, []int{1000, 2048}, []int{1000})
}

// benchmarkSteps runs steps of a Reducer on every rank of w, which live
// in this process: each rank marks its gradients last first and waits.
func benchmarkSteps(b *testing.B, w []*comm.Comm, shapes [][]int, opts ddp.Options) {
	ranks := len(w)
	ctx := context.Background()
	rs := make([]*ddp.Reducer[float32], ranks)
	testkit.NoErrors(b, onEveryRank(w, func(rank int, c *comm.Comm) error {
		r, err := ddp.New[float32](ctx, c, shapes, opts)
		rs[rank] = r
		return err
	}))
	step := func(r *ddp.Reducer[float32]) error {
		for i := r.Len() - 1; i >= 0; i-- {
			if err := r.Ready(ctx, i); err != nil {
				return err
			}
		}
		return r.Wait(ctx)
	}
	// The first step rebuilds the buckets.
	testkit.NoErrors(b, onEveryRank(w, func(rank int, c *comm.Comm) error { return step(rs[rank]) }))
	bytes := 0
	for i := range shapes {
		bytes += 4 * len(rs[0].Grad(i))
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make([]error, ranks)
	for rank := 1; rank < ranks; rank++ {
		wg.Go(func() {
			for range b.N {
				if errs[rank] = step(rs[rank]); errs[rank] != nil {
					return
				}
			}
		})
	}
	for range b.N {
		if errs[0] = step(rs[0]); errs[0] != nil {
			break
		}
	}
	wg.Wait()
	b.StopTimer()
	for rank, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", rank, err)
		}
	}
	b.ReportMetric(float64(len(rs[0].Buckets())), "buckets")
}

// BenchmarkReducerStep: one training step's gradient reduction of
// ResNet-50 (25.6M float32) on two ranks in this process, in-process and
// over shared memory, and of a small model where the Reducer's own cost
// per step shows.
func BenchmarkReducerStep(b *testing.B) {
	for _, wk := range worlds {
		if wk.name != "inproc" && wk.name != "shm" {
			continue
		}
		b.Run("resnet50/"+wk.name, func(b *testing.B) { benchmarkSteps(b, wk.make(b, 2), resnet50Shapes(), ddp.Options{}) })
		for _, caps := range []ddp.Options{{}, smallCaps} {
			b.Run(fmt.Sprintf("small/cap=%d/%s", caps.BucketCapBytes, wk.name), func(b *testing.B) {
				benchmarkSteps(b, wk.make(b, 2), shapesA, caps)
			})
		}
	}
}

// TestStepDoesNotAllocate: in the steady state a step allocates nothing
// of the Reducer's own (the hook here hands back one Work already done,
// so only the Reducer runs), synced or not.
func TestStepDoesNotAllocate(t *testing.T) {
	w, err := comm.NewLocalWorld(1, comm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	ctx := context.Background()
	r, err := ddp.New[float32](ctx, w[0], resnet50Shapes(), ddp.Options{BucketCapBytes: 1 << 20, FindUnused: true})
	if err != nil {
		t.Fatal(err)
	}
	done := comm.StartFunc(func() error { return nil })
	if err := r.SetHook(func(context.Context, *comm.Comm, *ddp.Bucket[float32]) *comm.Work { return done }); err != nil {
		t.Fatal(err)
	}
	step := func() {
		for i := r.Len() - 1; i >= 1; i-- { // gradient 0 is unused
			if err := r.Ready(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step() // the rebuild
	for _, sync := range []bool{true, false} {
		r.SetSync(sync)
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("sync %v: %v allocations per step, want 0", sync, n)
		}
	}
}
