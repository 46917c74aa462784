package launch_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/launch"
)

// A program that is its own launcher: run without one, it starts 4 ranks
// of itself; under commrun, torchrun, mpirun or srun it is one rank.
func ExampleSpawn() {
	ctx := context.Background()
	parent, err := launch.Spawn(ctx, 4)
	if parent { // the ranks have run
		if err != nil {
			log.Fatal(err) // names the rank that failed, with its last lines
		}
		return
	}
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sum := []int{c.Rank()}
	if err := comm.AllReduce(ctx, c, sum, sum, comm.Sum); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d: sum of ranks %d\n", c.Rank(), c.Size(), sum[0])
}

// commrun's command line, as cmd/commrun runs it.
func ExampleMain() {
	status := launch.Main(context.Background(), []string{"-n", "2", "--timeout", "1m", "--", "./train", "-epochs", "3"},
		os.Stdout, os.Stderr, nil)
	os.Exit(status)
}
