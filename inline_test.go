package comm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
)

// A blocking AllReduce on a shared-memory world runs straight on the board
// (backend.Inliner). It must still start after a collective that a Start
// call numbered before it (whose goroutine may not have reached the
// backend yet), give the same results, and leave the same flight record
// as the general path.
func TestAllReduceInline(t *testing.T) {
	world := factories()[2].make(t, 2, comm.Algorithms{}) // shm
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
		fr := c.FlightRecorder().Snapshot()
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
	world := factories()[2].make(t, 2, comm.Algorithms{}) // shm
	err := comm.AllReduce(context.Background(), world[0], make([]float32, 2), make([]float32, 3), comm.Sum)
	if err == nil || !errors.Is(err, comm.ErrInvalid) {
		t.Fatalf("lengths 2 and 3: %v, want an error wrapping ErrInvalid", err)
	}
}

// An inline all-reduce enters the flight record from inside the backend,
// once it has posted its part (backend.InlineRecorder): while it waits
// for a peer that has not called yet it must be in the record as
// pending, and one that fails before it posts (the world aborted) must
// be there as failed.
func TestAllReduceInlineFlightRecord(t *testing.T) {
	world := factories()[2].make(t, 2, comm.Algorithms{}) // shm
	ctx := context.Background()
	lastAllReduce := func(c *comm.Comm) (comm.FlightOp, int) {
		fc := c.FlightRecorder().Snapshot().Comms[0]
		var last comm.FlightOp
		for _, op := range fc.Recent {
			if op.Op == "all_reduce" && op.Seq > last.Seq {
				last = op
			}
		}
		return last, len(fc.Pending)
	}
	for round := range 3 {
		done := make(chan error, 1)
		x := []float32{1, 2}
		go func() { done <- comm.AllReduce(ctx, world[0], x, x, comm.Sum) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			op, pending := lastAllReduce(world[0])
			if op.State == "pending" && pending == 1 && op.SendBytes == 8 && !op.Entered.IsZero() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: rank 0 waits for rank 1, and its record's last all-reduce is %+v (%d pending)", round, op, pending)
			}
			time.Sleep(time.Millisecond)
		}
		y := []float32{3, 4}
		if err := comm.AllReduce(ctx, world[1], y, y, comm.Sum); err != nil {
			t.Fatalf("round %d: rank 1: %v", round, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("round %d: rank 0: %v", round, err)
		}
		if op, pending := lastAllReduce(world[0]); op.State != "done" || pending != 0 || x[0] != 4 || x[1] != 6 {
			t.Fatalf("round %d: rank 0's result %v, record %+v (%d pending)", round, x, op, pending)
		}
	}
	world[1].Abort(errors.New("test abort"))
	// Once rank 0 has seen the abort (its barrier fails), its next
	// all-reduce fails before it posts anything.
	if err := comm.Barrier(ctx, world[0]); err == nil {
		t.Fatal("Barrier after a peer aborted the world: no error")
	}
	err := comm.AllReduce(ctx, world[0], []float32{1}, []float32{1}, comm.Sum)
	if err == nil {
		t.Fatal("AllReduce after a peer aborted the world: no error")
	}
	op, pending := lastAllReduce(world[0])
	if op.State != "failed" || op.Error == "" || pending != 0 || op.SendBytes != 4 {
		t.Fatalf("all-reduce after the abort (%v): record %+v (%d pending)", err, op, pending)
	}
}
