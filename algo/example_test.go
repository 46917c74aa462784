package algo_test

import (
	"fmt"

	"github.com/gocomm/comm/algo"
)

// A ring all-reduce of 6 elements over 3 ranks, as rank 0 runs it: two
// reduce-scatter steps, then two all-gather steps, one block of
// EvenCounts(6, 3) per message.
func ExampleAllReduce() {
	plan, err := algo.AllReduce(algo.Ring, 0, 3, 6, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, st := range plan.Steps {
		for _, x := range st.Sends {
			fmt.Printf("step %d: send work[%d:%d] to %d\n", i, x.Off, x.Off+x.Len, x.Peer)
		}
		for _, x := range st.Recvs {
			fmt.Printf("step %d: recv work[%d:%d] from %d (reduce %v)\n", i, x.Off, x.Off+x.Len, x.Peer, x.Reduce)
		}
	}
	// Output:
	// step 0: send work[4:6] to 1
	// step 0: recv work[2:4] from 2 (reduce true)
	// step 1: send work[2:4] to 1
	// step 1: recv work[0:2] from 2 (reduce true)
	// step 2: send work[0:2] to 1
	// step 2: recv work[4:6] from 2 (reduce false)
	// step 3: send work[4:6] to 1
	// step 3: recv work[2:4] from 2 (reduce false)
}

// The errors say what to fix.
func ExampleAllReduce_errors() {
	_, err := algo.AllReduce(algo.Auto, 0, 4, 100, 0)
	fmt.Println(err)
	_, err = algo.Gather(algo.Tree, 0, 4, 0, []int{1, 2, 3})
	fmt.Println(err)
	// Output:
	// algo: algorithm not available for this operation: allreduce: algorithm auto must be resolved by the caller first (want one of ring, recursive-doubling, halving-doubling, tree, linear)
	// algo: invalid argument: gather: len(counts) = 3, want size 4 (one count per rank)
}

// AlgorithmsFor lists what a cost model may choose from, or what a test may
// force.
func ExampleAlgorithmsFor() {
	fmt.Println(algo.AlgorithmsFor("allgather"))
	// Output: [ring recursive-doubling tree]
}
