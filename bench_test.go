package comm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
)

// BenchmarkAllReduce measures all-reduce of float32 among 2 ranks over each
// transport and reports nccl-tests' figures: time per op, algbw = S/t and
// busbw = algbw * 2(n-1)/n, in GB/s (1e9 bytes).
func BenchmarkAllReduce(b *testing.B) {
	for _, f := range factories() {
		for _, size := range []int{8, 1 << 20, 64 << 20} {
			b.Run(fmt.Sprintf("%s/ranks=2/bytes=%d", f.name, size), func(b *testing.B) {
				benchAllReduce(b, f.make(b, 2, comm.Algorithms{}), size)
			})
		}
	}
}

func benchAllReduce(b *testing.B, world []*comm.Comm, size int) {
	n := len(world)
	bufs := make([][]float32, n)
	for i := range bufs {
		bufs[i] = make([]float32, size/4)
	}
	ctx := context.Background()
	run := func(iters int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for r, c := range world {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < iters; i++ {
					if err := comm.AllReduce(ctx, c, bufs[r], bufs[r], comm.Sum); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	run(2) // warm up connections and buffers
	b.SetBytes(int64(size))
	b.ResetTimer()
	d := run(b.N)
	b.StopTimer()
	t := d.Seconds() / float64(b.N)
	algbw := float64(size) / t / 1e9
	b.ReportMetric(t*1e6, "us/op")
	b.ReportMetric(algbw, "algbw-GB/s")
	b.ReportMetric(algbw*2*float64(n-1)/float64(n), "busbw-GB/s")
}
