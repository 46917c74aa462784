package object_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// Every rank counts words in its shard; AllReduce merges the counts
// (an associative and commutative merge, so Associative lets it run as a
// tree) and every rank gets the same totals.
func ExampleAllReduce() {
	world, err := comm.NewLocalWorld(3, comm.Options{})
	if err != nil {
		panic(err)
	}
	defer func() {
		for _, c := range world {
			c.Close()
		}
	}()
	shards := []string{"a b a", "b c", "a"}
	merge := func(x, y map[string]int) map[string]int {
		out := maps.Clone(x)
		for k, n := range y {
			out[k] += n
		}
		return out
	}
	totals := make([]map[string]int, len(world))
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts := map[string]int{}
			for _, w := range strings.Fields(shards[r]) {
				counts[w]++
			}
			total, err := object.AllReduce(context.Background(), c, counts, merge, object.Associative())
			if err != nil {
				panic(err)
			}
			totals[r] = total
		}()
	}
	wg.Wait()
	for _, k := range slices.Sorted(maps.Keys(totals[2])) {
		fmt.Print(k, "=", totals[2][k], " ")
	}
	fmt.Println()
	// Output: a=3 b=2 c=1
}
