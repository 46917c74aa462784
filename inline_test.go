package comm_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend"
)

// A blocking AllReduce on a shared-memory world runs straight on the board
// (backend.Inliner). It must still start after a collective that a Start
// call numbered before it (whose goroutine may not have reached the
// backend yet), give the same results, and leave the same flight record
// as the general path.
func TestAllReduceInline(t *testing.T) {
	world := factories()[2].make(t, 2, backend.Algorithms{}) // shm
	ctx := context.Background()
	const rounds = 50
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Go(func() {
			big := make([]float32, 1<<20) // 4 MiB: the stage, in a goroutine of its own
			for i := range rounds {
				if r == 0 {
					for j := range big {
						big[j] = float32(i)
					}
				}
				w := comm.StartBroadcast(ctx, c, big, 0)
				small := []float32{float32(r + 1), float32(i)}
				if err := comm.AllReduce(ctx, c, small, small, comm.Sum); err != nil {
					t.Errorf("rank %d round %d: AllReduce: %v", r, i, err)
					return
				}
				if err := w.Wait(); err != nil {
					t.Errorf("rank %d round %d: Broadcast: %v", r, i, err)
					return
				}
				if small[0] != 3 || small[1] != float32(2*i) || big[0] != float32(i) || big[len(big)-1] != float32(i) {
					t.Errorf("rank %d round %d: all-reduce %v, broadcast %v..%v", r, i, small, big[0], big[len(big)-1])
					return
				}
			}
		})
	}
	wg.Wait()
	for r, c := range world {
		fr := c.FlightRecord()
		if len(fr.Comms) != 1 {
			t.Fatalf("rank %d: %d communicators in the flight record", r, len(fr.Comms))
		}
		fc := fr.Comms[0]
		// The world's set-up may have run collectives of its own: count
		// from the record's last operations.
		if fc.Ops < 2*rounds || fc.Completed != fc.Ops || len(fc.Pending) != 0 {
			t.Errorf("rank %d: %d operations, %d completed, %d pending", r, fc.Ops, fc.Completed, len(fc.Pending))
		}
		// The last all-reduce (the broadcast before it may have entered
		// the record after it, from its goroutine).
		var last comm.FlightOp
		for _, op := range fc.Recent {
			if op.Seq > last.Seq {
				last = op
			}
		}
		if last.Op != "all_reduce" || last.State != "done" || last.SendBytes != 8 || last.RecvBytes != 8 || last.Exited.Before(last.Entered) {
			t.Errorf("rank %d: last operation %+v", r, last)
		}
	}
}

// An all-reduce whose arguments the general path refuses is refused the
// same way on a world that runs all-reduces inline.
func TestAllReduceInlineRefusesBadArguments(t *testing.T) {
	world := factories()[2].make(t, 2, backend.Algorithms{}) // shm
	err := comm.AllReduce(context.Background(), world[0], make([]float32, 2), make([]float32, 3), comm.Sum)
	if err == nil || !errors.Is(err, comm.ErrInvalid) {
		t.Fatalf("lengths 2 and 3: %v, want an error wrapping ErrInvalid", err)
	}
}
