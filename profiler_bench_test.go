package comm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/profile"
)

// BenchmarkProfileHook measures an 8 B float32 all-reduce among in-process
// ranks with the comms logger off and on: between two ranks, and in a world
// of one, where the op is nothing but the call path and the hook's share is
// largest. Build it a second time with -tags gocomm_noprofile, which
// compiles the hook out of launch: the two "off" figures then differ only
// by the hook's one branch (its cost when off); "on" is what profiling
// every op costs.
//
//	go test -c -o on.test . && go test -c -tags gocomm_noprofile -o out.test .
//	./on.test -test.run '^$' -test.bench ProfileHook -test.count 10
//	./out.test -test.run '^$' -test.bench ProfileHook -test.count 10
func BenchmarkProfileHook(b *testing.B) {
	for _, n := range []int{1, 2} {
		for _, mode := range []string{"off", "on"} {
			b.Run(fmt.Sprintf("ranks=%d/%s", n, mode), func(b *testing.B) {
				opts := comm.Options{Timeout: time.Minute}
				if mode == "on" {
					if !comm.ProfileCompiledIn {
						b.Skip("the hook is compiled out (-tags gocomm_noprofile)")
					}
					opts.Profile = &profile.Config{Enabled: true}
				}
				world, err := comm.NewLocalWorld(n, opts)
				if err != nil {
					b.Fatal(err)
				}
				defer closeAll(world)
				benchTinyAllReduce(b, world)
			})
		}
	}
}

func benchTinyAllReduce(b *testing.B, world []*comm.Comm) {
	ctx := context.Background()
	run := func(iters int) {
		var wg sync.WaitGroup
		for _, c := range world {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]float32, 2)
				for i := range iters {
					if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
						b.Error(err)
						return
					}
					if i%(1<<14) == 0 {
						c.Profiler().Reset() // bound the records' memory; a no-op when off
					}
				}
			}()
		}
		wg.Wait()
	}
	run(100) // warm up
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	run(b.N)
	b.StopTimer()
	if cpu > 0 {
		// CPU time of every rank (and of the runtime) per op.
		b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	}
}
