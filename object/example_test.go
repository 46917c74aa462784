package object_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
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

// config is a value the object examples move between ranks: any type
// encoding/gob can encode.
type config struct {
	LR     float64
	Layers []int
}

// Rank 0's configuration reaches every rank.
func ExampleBroadcast() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		var cfg config
		if c.Rank() == 0 {
			cfg = config{LR: 0.01, Layers: []int{128, 10}}
		}
		err := object.Broadcast(ctx, c, &cfg, 0)
		return fmt.Sprintf("%+v", cfg), err
	})
	// Output:
	// rank 0: {LR:0.01 Layers:[128 10]}
	// rank 1: {LR:0.01 Layers:[128 10]}
	// rank 2: {LR:0.01 Layers:[128 10]}
}

// Every rank learns every rank's host name (here made up).
func ExampleAllGather() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		names, err := object.AllGather(ctx, c, fmt.Sprintf("node-%d", c.Rank()/2))
		return strings.Join(names, " "), err
	})
	// Output:
	// rank 0: node-0 node-0 node-1
	// rank 1: node-0 node-0 node-1
	// rank 2: node-0 node-0 node-1
}

// Rank 0 collects a map from every rank; the others get nil.
func ExampleGather() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		stats := map[string]int{"steps": 10 * (c.Rank() + 1)}
		all, err := object.Gather(ctx, c, stats, 0)
		return fmt.Sprint(all), err
	})
	// Output:
	// rank 0: [map[steps:10] map[steps:20] map[steps:30]]
	// rank 1: []
	// rank 2: []
}

// Rank 2 hands each rank its own work item.
func ExampleScatter() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		var items []config
		if c.Rank() == 2 {
			items = []config{{LR: 0.1}, {LR: 0.2}, {LR: 0.3}}
		}
		mine, err := object.Scatter(ctx, c, items, 2)
		return fmt.Sprint(mine.LR), err
	})
	// Output:
	// rank 0: 0.1
	// rank 1: 0.2
	// rank 2: 0.3
}

// Strings are concatenated in rank order on the root: f need not be
// commutative.
func ExampleReduce() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		concat := func(a, b string) string { return a + b }
		s, err := object.Reduce(ctx, c, string(rune('a'+c.Rank())), concat, 1)
		return fmt.Sprintf("%q", s), err
	})
	// Output:
	// rank 0: ""
	// rank 1: "abc"
	// rank 2: ""
}

// The Start form of an object collective: Wait returns the value.
func ExampleStartAllGather() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		w := object.StartAllGather(ctx, c, c.Rank()*c.Rank()+1)
		// ... no other operation on c until w is done ...
		all, err := w.Wait()
		return fmt.Sprint(all), err
	})
	// Output:
	// rank 0: [1 2]
	// rank 1: [1 2]
}

// StartBroadcast's Wait returns the broadcast value.
func ExampleStartBroadcast() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		step := 0
		if c.Rank() == 0 {
			step = 42
		}
		got, err := object.StartBroadcast(ctx, c, &step, 0).Wait()
		return fmt.Sprint(got, step), err
	})
	// Output:
	// rank 0: 42 42
	// rank 1: 42 42
}
