package comm_test

import (
	"context"
	"fmt"

	"github.com/gocomm/comm"
)

// The flight recorder notes every operation as it is entered and
// completed; a snapshot tells what a rank did last (and, in a hang, what
// it waits in).
func ExampleFlightRecorder_Snapshot() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		grad := []float32{1, 2}
		if err := comm.AllReduce(ctx, c, grad, grad, comm.Sum); err != nil {
			return "", err
		}
		world := c.FlightRecorder().Snapshot().Comms[0]
		last := world.Recent[len(world.Recent)-1]
		return fmt.Sprintf("%s of %d bytes: %s, %d pending", last.Op, last.SendBytes, last.State, len(world.Pending)), nil
	})
	// Output:
	// rank 0: all_reduce of 8 bytes: done, 0 pending
	// rank 1: all_reduce of 8 bytes: done, 0 pending
}
