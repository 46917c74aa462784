package comm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gocomm/comm"
)

// forRanks is the world the examples run in: n ranks inside this process
// (comm.NewLocalWorld), body called on each at once in its own goroutine,
// then what each rank's body returned printed in rank order. A real
// program is started once per rank and calls comm.Init instead:
//
//	c, err := comm.Init(ctx, comm.Options{})
//	defer c.Close()
//	... the body below, with c ...
func forRanks(n int, body func(ctx context.Context, c *comm.Comm) (string, error)) {
	world, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]string, n)
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Go(func() {
			s, err := body(context.Background(), c)
			if err != nil {
				s = "error: " + err.Error()
			}
			out[r] = s
		})
	}
	wg.Wait()
	for _, c := range world {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	for r, s := range out {
		if s != "" {
			fmt.Printf("rank %d: %s\n", r, s)
		}
	}
}

// Every rank adds its gradient in place; all end with the sum.
func ExampleAllReduce() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		grad := []float32{float32(c.Rank()), 1}
		err := comm.AllReduce(ctx, c, grad, grad, comm.Sum)
		return fmt.Sprint(grad), err
	})
	// Output:
	// rank 0: [3 3]
	// rank 1: [3 3]
	// rank 2: [3 3]
}

// The maximum lands on the root only; the others pass no receive buffer.
func ExampleReduce() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		var max []int64
		if c.Rank() == 0 {
			max = make([]int64, 1)
		}
		err := comm.Reduce(ctx, c, []int64{int64(10 * c.Rank())}, max, comm.Max, 0)
		return fmt.Sprint(max), err
	})
	// Output:
	// rank 0: [20]
	// rank 1: []
	// rank 2: []
}

// Rank 1's parameters overwrite everyone's.
func ExampleBroadcast() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		params := make([]float64, 2)
		if c.Rank() == 1 {
			params = []float64{0.5, -2}
		}
		err := comm.Broadcast(ctx, c, params, 1)
		return fmt.Sprint(params), err
	})
	// Output:
	// rank 0: [0.5 -2]
	// rank 1: [0.5 -2]
	// rank 2: [0.5 -2]
}

// Each rank's block lands at recv[r*len(send):] on every rank.
func ExampleAllGather() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		all := make([]int32, 2*c.Size())
		err := comm.AllGather(ctx, c, []int32{int32(c.Rank()), -1}, all)
		return fmt.Sprint(all), err
	})
	// Output:
	// rank 0: [0 -1 1 -1 2 -1]
	// rank 1: [0 -1 1 -1 2 -1]
	// rank 2: [0 -1 1 -1 2 -1]
}

// Rank r contributes r+1 elements; counts says how many each gives.
func ExampleAllGatherV() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		counts := []int{1, 2, 3}
		mine := make([]uint8, counts[c.Rank()])
		for i := range mine {
			mine[i] = uint8(c.Rank())
		}
		all := make([]uint8, 6)
		err := comm.AllGatherV(ctx, c, mine, all, counts)
		return fmt.Sprint(all), err
	})
	// Output:
	// rank 0: [0 1 1 2 2 2]
	// rank 1: [0 1 1 2 2 2]
	// rank 2: [0 1 1 2 2 2]
}

// Rank 2 collects one value from every rank.
func ExampleGather() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		var all []float32
		if c.Rank() == 2 {
			all = make([]float32, c.Size())
		}
		err := comm.Gather(ctx, c, []float32{float32(c.Rank()) / 2}, all, 2)
		return fmt.Sprint(all), err
	})
	// Output:
	// rank 0: []
	// rank 1: []
	// rank 2: [0 0.5 1]
}

// Rank 0 collects blocks of different sizes.
func ExampleGatherV() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		counts := []int{0, 1, 2}
		mine := make([]int16, counts[c.Rank()])
		for i := range mine {
			mine[i] = int16(10*c.Rank() + i)
		}
		var all []int16
		if c.Rank() == 0 {
			all = make([]int16, 3)
		}
		err := comm.GatherV(ctx, c, mine, all, counts, 0)
		return fmt.Sprint(all), err
	})
	// Output:
	// rank 0: [10 20 21]
	// rank 1: []
	// rank 2: []
}

// Rank 0 hands block r of its buffer to rank r.
func ExampleScatter() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		var shards []int
		if c.Rank() == 0 {
			shards = []int{0, 0, 1, 1, 2, 2}
		}
		mine := make([]int, 2)
		err := comm.Scatter(ctx, c, shards, mine, 0)
		return fmt.Sprint(mine), err
	})
	// Output:
	// rank 0: [0 0]
	// rank 1: [1 1]
	// rank 2: [2 2]
}

// Rank 1 hands counts[r] elements to rank r.
func ExampleScatterV() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		counts := []int{3, 0, 1}
		var all []uint32
		if c.Rank() == 1 {
			all = []uint32{7, 8, 9, 10}
		}
		mine := make([]uint32, counts[c.Rank()])
		err := comm.ScatterV(ctx, c, all, mine, counts, 1)
		return fmt.Sprint(mine), err
	})
	// Output:
	// rank 0: [7 8 9]
	// rank 1: []
	// rank 2: [10]
}

// Every rank sends Size() blocks; rank r receives the sum of every rank's
// block r (ZeRO's gradient partitioning).
func ExampleReduceScatter() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		send := []float64{1, 10, 100} // one element per rank
		mine := make([]float64, 1)
		err := comm.ReduceScatter(ctx, c, send, mine, comm.Sum)
		return fmt.Sprint(mine), err
	})
	// Output:
	// rank 0: [3]
	// rank 1: [30]
	// rank 2: [300]
}

// Blocks of different sizes: rank r receives counts[r] reduced elements.
func ExampleReduceScatterV() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		counts := []int{2, 1, 0}
		send := []int32{1, 2, 3}
		mine := make([]int32, counts[c.Rank()])
		err := comm.ReduceScatterV(ctx, c, send, mine, counts, comm.Prod)
		return fmt.Sprint(mine), err
	})
	// Output:
	// rank 0: [1 8]
	// rank 1: [27]
	// rank 2: []
}

// Block p of rank r's send goes to rank p, into block r of its recv (the
// transpose; expert-parallel dispatch).
func ExampleAllToAll() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		send := make([]int, 3)
		for p := range send {
			send[p] = 10*c.Rank() + p // from rank, to rank p
		}
		recv := make([]int, 3)
		err := comm.AllToAll(ctx, c, send, recv)
		return fmt.Sprint(recv), err
	})
	// Output:
	// rank 0: [0 10 20]
	// rank 1: [1 11 21]
	// rank 2: [2 12 22]
}

// Rank r sends r+1 copies of its rank to every peer: sendCounts says how
// many go to each rank, recvCounts how many come from each.
func ExampleAllToAllV() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		n := c.Rank() + 1
		send := make([]int8, 3*n)
		for i := range send {
			send[i] = int8(c.Rank())
		}
		sendCounts := []int{n, n, n}
		recvCounts := []int{1, 2, 3}
		recv := make([]int8, 6)
		err := comm.AllToAllV(ctx, c, send, recv, sendCounts, recvCounts)
		return fmt.Sprint(recv), err
	})
	// Output:
	// rank 0: [0 1 1 2 2 2]
	// rank 1: [0 1 1 2 2 2]
	// rank 2: [0 1 1 2 2 2]
}

// No rank leaves the barrier before every rank has entered it.
func ExampleBarrier() {
	var mu sync.Mutex
	entered := 0
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		mu.Lock()
		entered++
		mu.Unlock()
		err := comm.Barrier(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d entered before I left", entered), err
	})
	// Output:
	// rank 0: 3 entered before I left
	// rank 1: 3 entered before I left
	// rank 2: 3 entered before I left
}

// Rank 2 never arrives: after the timeout every rank that did is told
// which rank is missing, instead of waiting for it.
func ExampleMonitoredBarrier() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		if c.Rank() == 2 {
			return "stuck elsewhere", nil
		}
		err := comm.MonitoredBarrier(ctx, c, 500*time.Millisecond, true)
		var be *comm.BarrierError
		if errors.As(err, &be) {
			return fmt.Sprintf("late ranks %v", be.Late), nil
		}
		return "passed", err
	})
	// Output:
	// rank 0: late ranks [2]
	// rank 1: late ranks [2]
	// rank 2: stuck elsewhere
}

// Two gradient buffers of different sizes are summed in one collective.
func ExampleAllReduceCoalesced() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		weights := []float32{1, 2, 3}
		bias := []float32{float32(c.Rank())}
		err := comm.AllReduceCoalesced(ctx, c, [][]float32{weights, bias}, comm.Sum)
		return fmt.Sprint(weights, bias), err
	})
	// Output:
	// rank 0: [2 4 6] [1]
	// rank 1: [2 4 6] [1]
}

// Two all-gathers in one collective: recvs[i] gets every rank's sends[i].
func ExampleAllGatherCoalesced() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		r := int64(c.Rank())
		ids := make([]int64, 2)
		pairs := make([]int64, 4)
		err := comm.AllGatherCoalesced(ctx, c, [][]int64{{r}, {r, r * r}}, [][]int64{ids, pairs})
		return fmt.Sprint(ids, pairs), err
	})
	// Output:
	// rank 0: [0 1] [0 0 1 1]
	// rank 1: [0 1] [0 0 1 1]
}

// A small all-reduce on the latency-first schedule.
func ExampleInferenceAllReduce() {
	forRanks(4, func(ctx context.Context, c *comm.Comm) (string, error) {
		logits := make([]float32, 2)
		err := comm.InferenceAllReduce(ctx, c, []float32{1, float32(c.Rank())}, logits, comm.Sum)
		return fmt.Sprint(logits), err
	})
	// Output:
	// rank 0: [4 6]
	// rank 1: [4 6]
	// rank 2: [4 6]
	// rank 3: [4 6]
}

// Start an all-reduce, do other work, then wait for it.
func ExampleStartAllReduce() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		grad := []float64{1, float64(c.Rank())}
		w := comm.StartAllReduce(ctx, c, grad, grad, comm.Avg)
		// ... grad belongs to w until it is done: compute something else ...
		err := w.Wait()
		return fmt.Sprint(grad), err
	})
	// Output:
	// rank 0: [1 0.5]
	// rank 1: [1 0.5]
}

// Several operations in flight at once, waited together.
func ExampleWaitAll() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		a := []int{c.Rank() + 1}
		b := []int{10}
		err := comm.WaitAll(ctx,
			comm.StartAllReduce(ctx, c, a, a, comm.Sum),
			comm.StartBroadcast(ctx, c, b, 1),
			comm.StartBarrier(ctx, c),
		)
		return fmt.Sprint(a, b), err
	})
	// Output:
	// rank 0: [3] [10]
	// rank 1: [3] [10]
}

// WaitAny returns the index of whichever handle is done first; nil
// entries (finished and dropped ones) are skipped.
func ExampleWaitAny() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		peer := 1 - c.Rank()
		x, y := []int{0}, []int{0}
		works := []*comm.Work{
			comm.StartRecv(ctx, c, x, peer, 1),
			comm.StartRecv(ctx, c, y, peer, 2),
		}
		if err := comm.Send(ctx, c, []int{20}, peer, 2); err != nil {
			return "", err
		}
		if err := comm.Send(ctx, c, []int{10}, peer, 1); err != nil {
			return "", err
		}
		for range works {
			i, err := comm.WaitAny(ctx, works...)
			if err != nil {
				return "", err
			}
			works[i] = nil
		}
		return fmt.Sprint(x, y), nil
	})
	// Output:
	// rank 0: [10] [20]
	// rank 1: [10] [20]
}
