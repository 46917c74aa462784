package ddp_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
)

// A model of three parameters trained data-parallel on two ranks: each
// rank writes its gradients into the Reducer's memory as backward makes
// them (last layer first) and marks them ready; Wait leaves the average
// over the ranks in place.
func ExampleReducer() {
	world, err := comm.NewLocalWorld(2, comm.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		for _, c := range world {
			c.Close()
		}
	}()
	shapes := [][]int{{2, 2}, {2}, {1}} // a weight, a bias, a scale
	results := make([]string, len(world))
	var wg sync.WaitGroup
	for rank, c := range world {
		wg.Go(func() {
			ctx := context.Background()
			r, err := ddp.New[float32](ctx, c, shapes, ddp.Options{})
			if err != nil {
				results[rank] = err.Error()
				return
			}
			for i := len(shapes) - 1; i >= 0; i-- { // backward
				g := r.Grad(i)
				for j := range g {
					g[j] = float32((rank + 1) * (j + 1))
				}
				if err := r.Ready(ctx, i); err != nil {
					results[rank] = err.Error()
					return
				}
			}
			if err := r.Wait(ctx); err != nil {
				results[rank] = err.Error()
				return
			}
			results[rank] = fmt.Sprint(r.Grad(0), r.Grad(1), r.Grad(2))
		})
	}
	wg.Wait()
	for rank, s := range results {
		fmt.Printf("rank %d: %s\n", rank, s)
	}
	// Output:
	// rank 0: [1.5 3 4.5 6] [1.5 3] [1.5]
	// rank 1: [1.5 3 4.5 6] [1.5 3] [1.5]
}
