package comm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// The recorder of an in-process world: what ran, in order, with sizes and
// states, the group's own record, and an operation still pending.
func TestFlightRecord(t *testing.T) {
	w := testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute}) })
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		buf := make([]float32, 4)
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			return err
		}
		if err := comm.Broadcast(ctx, c, buf, 1); err != nil {
			return err
		}
		g, err := c.NewGroup(ctx, []int{1})
		if err != nil || g.Rank() < 0 {
			return err
		}
		return comm.Barrier(ctx, g)
	}))
	rec := w[0].FlightRecorder().Snapshot()
	if rec.Rank != 0 || rec.Size != 2 || len(rec.Comms) != 1 {
		t.Fatalf("rank 0's record: %+v", rec)
	}
	world := rec.Comms[0]
	var ops []string
	for _, op := range world.Recent {
		ops = append(ops, op.Op)
		if op.State != "done" || op.Entered.IsZero() || op.Exited.Before(op.Entered) {
			t.Errorf("op %+v", op)
		}
	}
	if !slices.Equal(ops, []string{"all_reduce", "broadcast", "all_gather"}) || world.LastSeq != 3 {
		t.Errorf("world ops %v, last seq %d", ops, world.LastSeq)
	}
	if b := world.Recent[1]; b.Root != 1 || b.SendBytes != 16 || b.DType != "float32" || b.Reduce != "" {
		t.Errorf("broadcast %+v", b)
	}
	if a := world.Recent[0]; a.Reduce != "Sum" || a.Root != -1 {
		t.Errorf("all-reduce %+v", a)
	}
	if world.BytesSent < 32 || !slices.Equal(world.Ranks, []int{0, 1}) {
		t.Errorf("bytes sent %d, ranks %v", world.BytesSent, world.Ranks)
	}
	if rec1 := w[1].FlightRecorder().Snapshot(); len(rec1.Comms) != 2 || !slices.Equal(rec1.Comms[1].Ranks, []int{1}) || rec1.Comms[1].Recent[0].Op != "barrier" {
		t.Errorf("rank 1's record: %+v", rec1)
	}

	// Rank 0 alone starts an all-reduce: it stays pending until closed.
	work := comm.StartAllReduce(ctx, w[0], make([]int32, 2), make([]int32, 2), comm.Max)
	deadline := time.Now().Add(10 * time.Second)
	for len(w[0].FlightRecorder().Snapshot().Comms[0].Pending) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p := w[0].FlightRecorder().Snapshot().Comms[0].Pending; len(p) != 1 || p[0].Seq != 4 || p[0].State != "pending" {
		t.Errorf("pending %+v", p)
	}
	w[0].Close()
	if err := work.Wait(); err == nil {
		t.Fatal("a closed rank's pending all-reduce succeeded")
	}
	if st := w[0].FlightRecorder().Snapshot().Comms[0].Recent[3]; st.State != "failed" || st.Error == "" {
		t.Errorf("after close: %+v", st)
	}
}

// A timed-out all-reduce explained on every rank: ranks 0 and 1 entered
// it, rank 2 never did (its last op was all-reduce #1), and rank 3 never
// answers (its watcher is stopped, as if its process were gone).
func TestFlightRecorderExplainsTimeout(t *testing.T) {
	w := tcpWorld(t, 4, comm.Options{Timeout: time.Second})
	ctx := context.Background()
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		buf := make([]float64, 3)
		return comm.AllReduce(ctx, c, buf, buf, comm.Sum)
	}))
	comm.StopFlightWatcher(w[3])
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			buf := make([]float64, 3)
			errs[r] = comm.AllReduce(ctx, w[r], buf, buf, comm.Sum)
		})
	}
	wg.Wait()
	// Rank 2 comes back afterwards and finds the world aborted.
	errs[2] = comm.Barrier(ctx, w[2])
	for r, err := range errs {
		var d *comm.DesyncError
		if !errors.As(err, &d) {
			t.Errorf("rank %d: not explained by the flight recorder: %v", r, err)
			continue
		}
		t.Logf("rank %d: %v", r, err)
		if d.Op != "all_reduce" || d.Seq != 2 || !slices.Equal(d.NeverEntered, []int{2}) || !slices.Equal(d.Inside, []int{0, 1}) ||
			!slices.Equal(d.NoAnswer, []int{3}) {
			t.Errorf("rank %d: %+v", r, d)
		}
		for _, want := range []string{"timed out in all_reduce #2", "rank 2 never entered it (rank 2 last entered all_reduce #1 (done))", "rank 3 did not answer"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("rank %d: error lacks %q", r, want)
			}
		}
	}
	// The rank whose timer fired first keeps the timeout in its chain (the
	// other was aborted by it).
	if !errors.Is(errs[0], context.DeadlineExceeded) && !errors.Is(errs[1], context.DeadlineExceeded) {
		t.Errorf("neither rank 0 nor rank 1 has the timeout in its chain:\n%v\n%v", errs[0], errs[1])
	}
}

// The debug endpoint serves the flight record as JSON.
func TestFlightRecorderHTTP(t *testing.T) {
	w := tcpWorld(t, 2, comm.Options{Timeout: time.Minute, DebugAddr: "127.0.0.1:0"})
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		return comm.AllReduce(ctx, c, []int64{1, 2}, make([]int64, 2), comm.Sum)
	}))
	for r, c := range w {
		addr := c.FlightRecorder().DebugAddr()
		if addr == nil {
			t.Fatalf("rank %d: no debug address", r)
		}
		rec := getFlightRecord(t, addr.String())
		if rec.Rank != r || len(rec.Comms) != 1 || rec.Comms[0].LastSeq != 1 || rec.Comms[0].BytesSent != 16 || len(rec.Comms[0].Pending) != 0 {
			t.Errorf("rank %d served %+v", r, rec)
		}
	}
	if _, err := comm.Init(ctx, comm.Options{DebugAddr: "nonsense", Getenv: func(string) string { return "" }}); err == nil || !strings.Contains(err.Error(), "GOCOMM_DEBUG_ADDR") {
		t.Errorf("bad address: %v", err)
	}
}

// getFlightRecord reads the flight record a debug endpoint serves.
func getFlightRecord(t *testing.T, addr string) comm.FlightRecord {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/gocomm/flightrec")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rec comm.FlightRecord
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return rec
}
