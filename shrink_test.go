package comm_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// Rank 2 of 4 leaves; the others' all-reduce fails, they shrink to a world
// of 3 (ranks 0, 1, 3 becoming 0, 1, 2), and collectives work on it.
func TestShrink(t *testing.T) {
	w := tcpWorld(t, 4, comm.Options{Timeout: 5 * time.Second, DebugAddr: "127.0.0.1:0"})
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		return comm.AllReduce(ctx, c, []int64{1}, make([]int64, 1), comm.Sum)
	}))
	w[2].Close()
	survivors := []*comm.Comm{w[0], w[1], w[3]}
	shrunk := make([]*comm.Comm, 3)
	errs := testkit.OnEveryRank(survivors, func(i int, c *comm.Comm) error {
		if err := comm.AllReduce(ctx, c, []int64{1}, make([]int64, 1), comm.Sum); err == nil {
			return errors.New("all-reduce without rank 2 succeeded")
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		nc, err := c.Shrink(sctx)
		if err != nil {
			return err
		}
		shrunk[i] = nc
		if nc.Rank() != i || nc.Size() != 3 {
			t.Errorf("survivor %d: rank %d of %d in the shrunk world", i, nc.Rank(), nc.Size())
		}
		if nc.Backend() != c.Backend() {
			t.Errorf("survivor %d: the shrunk world's backend is %q, the old one's %q", i, nc.Backend(), c.Backend())
		}
		got := make([]int64, 2)
		if err := comm.AllReduce(ctx, nc, []int64{int64(c.Rank()), 1}, got, comm.Sum); err != nil {
			return err
		}
		if !slices.Equal(got, []int64{0 + 1 + 3, 3}) {
			t.Errorf("survivor %d: all-reduce on the shrunk world = %v, want [4 3]", i, got)
		}
		if c.FlightRecorder().DebugAddr() != nil || nc.FlightRecorder().DebugAddr() == nil {
			t.Errorf("survivor %d: the debug endpoint did not move to the shrunk world (old %v, new %v)", i, c.FlightRecorder().DebugAddr(), nc.FlightRecorder().DebugAddr())
		} else if rec := getFlightRecord(t, nc.FlightRecorder().DebugAddr().String()); rec.Rank != i || rec.Size != 3 {
			t.Errorf("survivor %d: the endpoint serves rank %d of %d", i, rec.Rank, rec.Size)
		}
		return comm.Barrier(ctx, nc)
	})
	t.Cleanup(func() { testkit.CloseAll(shrunk) })
	testkit.NoErrors(t, errs)
	if _, err := w[2].Shrink(ctx); err == nil {
		t.Error("the rank that left shrank too")
	}
	// The shrunk world shrinks again, past its rank 1 (old rank 1).
	shrunk[1].Close()
	again := make([]*comm.Comm, 2)
	errs = testkit.OnEveryRank([]*comm.Comm{shrunk[0], shrunk[2]}, func(i int, c *comm.Comm) error {
		if err := comm.Barrier(ctx, c); err == nil {
			return errors.New("barrier without rank 1 succeeded")
		}
		nc, err := c.Shrink(ctx)
		if err != nil {
			return err
		}
		again[i] = nc
		return comm.AllReduce(ctx, nc, []int32{1}, make([]int32, 1), comm.Sum)
	})
	t.Cleanup(func() { testkit.CloseAll(again) })
	testkit.NoErrors(t, errs)
}

func TestShrinkNeedsAStore(t *testing.T) {
	w := testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(2, comm.Options{}) })
	if _, err := w[0].Shrink(context.Background()); err == nil {
		t.Error("a world without a store shrank")
	}
}
