package onebit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/onebit"
)

// Two ranks average a gradient with 1-bit compression. Each keeps its
// State from step to step (the error feedback); the result is the same on
// every rank: the signs of the true average, [1.5 -3 4.5 -6], times one
// scale per chunk (the ranks' RMS averaged); what the signs lose goes into
// st's errors and is sent at the next step. The ranks run in one process here
// (comm.NewLocalWorld); a real program calls comm.Init once per rank.
func ExampleAllReduce() {
	world, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	results := make([][]float32, len(world))
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Go(func() {
			defer c.Close()
			grad := []float32{1, -2, 3, -4}
			for i := range grad {
				grad[i] *= float32(r + 1)
			}
			st := onebit.NewState(len(grad), c.Size())
			if err := onebit.AllReduce(context.Background(), c, grad, st); err != nil {
				fmt.Println(err)
				return
			}
			results[r] = grad
		})
	}
	wg.Wait()
	fmt.Println(results[0])
	fmt.Println("same on every rank:", slices.Equal(results[0], results[1]))
	// Output:
	// [2.0539596 -2.0539596 2.0539596 -2.0539596]
	// same on every rank: true
}
