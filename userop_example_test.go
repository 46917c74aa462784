package comm_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocomm/comm"
)

// onLocalWorld runs f on every rank of an in-process world of n and
// returns rank 0's result.
func onLocalWorld[T any](n int, f func(ctx context.Context, c *comm.Comm) T) T {
	world, err := comm.NewLocalWorld(n, comm.Options{})
	if err != nil {
		panic(err)
	}
	out := make([]T, n)
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Go(func() { out[r] = f(context.Background(), c) })
	}
	wg.Wait()
	for _, c := range world {
		c.Close()
	}
	return out[0]
}

// A non-commutative op: the last non-zero value in rank order (an
// "overwrite if set" merge). Every rank makes the op, in the same order.
func ExampleNewOp() {
	got := onLocalWorld(4, func(ctx context.Context, c *comm.Comm) []int32 {
		lastSet, err := comm.NewOp(c, "last-set", func(inout, in []int32) {
			for i, v := range in {
				if v != 0 {
					inout[i] = v
				}
			}
		}, false)
		if err != nil {
			return nil
		}
		defer c.FreeOp(lastSet)
		// Rank r sets element r%2 to 10*r+1 and leaves the other at zero.
		buf := make([]int32, 2)
		buf[c.Rank()%2] = int32(10*c.Rank() + 1)
		if err := comm.AllReduce(ctx, c, buf, buf, lastSet); err != nil {
			return nil
		}
		return buf
	})
	fmt.Println(got)
	// Output: [21 31]
}

// PreMulSum(c, 1/n) averages float gradients in the same pass as the sum.
func ExamplePreMulSum() {
	got := onLocalWorld(4, func(ctx context.Context, c *comm.Comm) []float32 {
		avg, err := comm.PreMulSum(c, float32(0.25))
		if err != nil {
			return nil
		}
		defer c.FreeOp(avg)
		grads := []float32{float32(c.Rank()), 1}
		if err := comm.AllReduce(ctx, c, grads, grads, avg); err != nil {
			return nil
		}
		return grads
	})
	fmt.Println(got)
	// Output: [1.5 1]
}

// The ranks of one process share its host: one node, and a host
// communicator of every rank.
func ExampleComm_SplitByHost() {
	got := onLocalWorld(3, func(ctx context.Context, c *comm.Comm) string {
		host, err := c.SplitByHost(ctx)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("node %d of %d, host ranks %v", c.NodeRank(), c.NodeCount(), host.Ranks())
	})
	fmt.Println(got)
	// Output: node 0 of 1, host ranks [0 1 2]
}
