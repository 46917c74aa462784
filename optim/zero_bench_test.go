package optim

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// BenchmarkZeroStep compares a ZeRO-2 step with a DDP step (the Reducer's
// all-reduce, then Adam over all the parameters) on 64 MiB of gradients,
// 16 tensors of 4 MiB, on 2 ranks over shared memory; ZeRO-1 is beside
// them. A step is marking every gradient ready (each refilled first, as
// backward would) and stepping; there is no backward to overlap with, so
// this is the cost of the communication and the update alone. state-B/rank
// is the optimizer state each rank holds (StateBytes), grad-B/rank its
// gradient memory after the steps (GradBytes; the Reducer's buckets for
// DDP), heap-B/rank what its optimizer, Reducer and gradients added to the
// heap when made (stage 2's bucket pool is made in the first step).
func BenchmarkZeroStep(b *testing.B) {
	const ranks, tensors, perTensor = 2, 16, 1 << 20 // 64 MiB of float32
	for _, mode := range []string{"zero2", "allreduce+adam", "zero1"} {
		b.Run(fmt.Sprintf("%s/%d ranks/64MiB", mode, ranks), func(b *testing.B) {
			w := openWorld(b, "shm", ranks)
			ctx := testkit.Context(b, 10*time.Minute)
			shapes := make([]int, tensors)
			for i := range shapes {
				shapes[i] = perTensor
			}
			type ranker struct {
				grad  func(i int) []float32
				ready func(ctx context.Context, i int) error
				step  func(ctx context.Context) error
				state int64
				grads func() int64
			}
			rs := make([]ranker, ranks)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			testkit.NoErrors(b, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
				params := zeroParams(shapes)
				if mode != "allreduce+adam" {
					stage := 2
					if mode == "zero1" {
						stage = 1
					}
					z, err := NewZero(ctx, c, ZeroConfig{Stage: stage}, params...)
					if err != nil {
						return err
					}
					rs[r] = ranker{z.Grad, z.Ready, z.Step, z.StateBytes(), z.GradBytes}
					return nil
				}
				red, err := ddp.New[float32](ctx, c, [][]int{{perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor},
					{perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}, {perTensor}}, ddp.Options{})
				if err != nil {
					return err
				}
				a, err := NewAdam(Config{}, params...)
				if err != nil {
					return err
				}
				grads := make([][]float32, tensors)
				rs[r] = ranker{red.Grad, red.Ready, func(ctx context.Context) error {
					if err := red.Wait(ctx); err != nil {
						return err
					}
					for i := range grads {
						grads[i] = red.Grad(i)
					}
					return a.Step(grads...)
				}, a.StateBytes(), red.BucketBytes}
				return nil
			}))
			runtime.GC()
			runtime.ReadMemStats(&after)
			// What each rank's optimizer and gradients hold on the heap:
			// the growth since before they were made, less the parameters.
			heap := (int64(after.HeapAlloc)-int64(before.HeapAlloc))/ranks - 4*tensors*perTensor
			b.SetBytes(4 * tensors * perTensor)
			b.ResetTimer()
			testkit.NoErrors(b, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
				for range b.N {
					for i := tensors - 1; i >= 0; i-- { // backward's order
						g := rs[r].grad(i)
						for j := range g {
							g[j] = float32(r+1) * 1e-3
						}
						if err := rs[r].ready(ctx, i); err != nil {
							return err
						}
					}
					if err := rs[r].step(ctx); err != nil {
						return err
					}
				}
				return nil
			}))
			b.ReportMetric(float64(rs[0].state), "state-B/rank")
			b.ReportMetric(float64(heap), "heap-B/rank")
			b.ReportMetric(float64(rs[0].grads()), "grad-B/rank")
		})
	}
}
