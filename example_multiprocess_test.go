package comm_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/launch"
)

// splitRank is one rank of Example_multiProcess: it joins the world the
// launcher described, splits it by the parity of its rank, and sums the
// world ranks of its half.
func splitRank(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	half, err := c.Split(ctx, c.Rank()%2, c.Rank())
	if err != nil {
		return err
	}
	defer half.Close()
	sum := []int{c.Rank()}
	if err := comm.AllReduce(ctx, half, sum, sum, comm.Sum); err != nil {
		return err
	}
	fmt.Printf("world rank %d of %d: rank %d of %d in half %d, whose world ranks sum to %d\n",
		c.Rank(), c.Size(), half.Rank(), half.Size(), c.Rank()%2, sum[0])
	return nil
}

// A job of 4 processes on this host: launch.SpawnConfig runs 4 copies of
// the program as the ranks (commrun, torchrun, mpirun or srun would do
// the same), and each rank runs splitRank: Init, then Split. A program of
// your own calls launch.Spawn(ctx, 4) first in main and, where it returns
// parent=false, splitRank's body (see launch.Spawn's example). Here the
// copies are this test binary, told by GOCOMM_TEST_CHILD to run splitRank
// (TestMain); each rank's lines come back prefixed with "[rank] ".
func Example_multiProcess() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	_, err := launch.SpawnConfig(ctx, launch.Config{
		NProcs:  4,
		Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env:    append(os.Environ(), childEnv+"=example-split"),
		Stdout: &out,
	})
	if err != nil {
		log.Fatal(err) // names the rank that failed, with its last lines
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// [0] world rank 0 of 4: rank 0 of 2 in half 0, whose world ranks sum to 2
	// [1] world rank 1 of 4: rank 0 of 2 in half 1, whose world ranks sum to 4
	// [2] world rank 2 of 4: rank 1 of 2 in half 0, whose world ranks sum to 2
	// [3] world rank 3 of 4: rank 1 of 2 in half 1, whose world ranks sum to 4
}
