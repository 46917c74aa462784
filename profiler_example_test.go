//go:build !gocomm_noprofile

package comm_test

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/profile"
)

// Profile a training step's gradient all-reduce under its own log name,
// then print what was recorded. At the end of a real run every rank would
// call c.Profiler().LogSummary(ctx, os.Stdout, true) for the table and the
// straggler analysis.
func ExampleWithLogName() {
	world, err := comm.NewLocalWorld(2, comm.Options{Profile: &profile.Config{Enabled: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		for _, c := range world {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	for _, c := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := comm.WithLogName(context.Background(), "grad_allreduce")
			grads := []float32{1, 2, 3, 4}
			if err := comm.AllReduce(ctx, c, grads, grads, comm.Avg); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	wg.Wait()
	for _, r := range world[0].Profiler().Records() {
		fmt.Printf("%s: %s of %s over %d ranks\n", r.Name, r.Op, profile.ConvertSize(r.Bytes), r.CommSize)
	}
	// Output: grad_allreduce: all_reduce of 16.0 B over 2 ranks
}
