package comm_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// TestEveryCollectiveHasStartForm reads the package's source: every
// exported function whose first parameters are (ctx context.Context, c
// *Comm) and that does not itself return a handle must have a Start form
// of the same name returning *Work. This is what the README promises
// (package object checks its own collectives the same way).
func TestEveryCollectiveHasStartForm(t *testing.T) {
	funcs := exportedFuncs(t, false)
	blocking := blockingCollectives(t, funcs)
	var missing []string
	for _, name := range blocking {
		start, ok := funcs["Start"+name]
		if !ok || !returnsHandle(start) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("collectives without a Start form returning *Work: %v", missing)
	}
	t.Logf("%d blocking collectives: %v", len(blocking), blocking)
}

// TestEveryCollectiveHasExample: every blocking collective has an
// Example function of its name, so that go doc shows it in use.
func TestEveryCollectiveHasExample(t *testing.T) {
	blocking := blockingCollectives(t, exportedFuncs(t, false))
	examples := exportedFuncs(t, true)
	var missing []string
	for _, name := range blocking {
		if _, ok := examples["Example"+name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("collectives without an Example function: %v", missing)
	}
}

// exportedFuncs returns the package's exported top-level functions by
// name: of its test files when tests is set, else of the others.
func exportedFuncs(t *testing.T, tests bool) map[string]*ast.FuncDecl {
	t.Helper()
	funcs, err := testkit.ExportedFuncs(".", tests)
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// blockingCollectives returns, sorted, the names of funcs that are
// collectives in blocking form: not Start..., first parameters (ctx, c
// *Comm), not returning a handle. It fails the test if the scan misses
// collectives it must see, since it would then prove nothing.
func blockingCollectives(t *testing.T, funcs map[string]*ast.FuncDecl) []string {
	t.Helper()
	var blocking []string
	for name, fd := range funcs {
		// AllocShared is set-up, as Split and NewGroup are: no Start form.
		if name == "AllocShared" {
			continue
		}
		if !strings.HasPrefix(name, "Start") && isCollective(fd) && !returnsHandle(fd) {
			blocking = append(blocking, name)
		}
	}
	slices.Sort(blocking)
	for _, want := range []string{"AllReduce", "AllReduceCoalesced", "AllGatherCoalesced", "InferenceAllReduce",
		"MonitoredBarrier", "Recv", "Send", "Barrier", "AllToAllV"} {
		if !slices.Contains(blocking, want) {
			t.Fatalf("the scan did not find the collective %s (found %v)", want, blocking)
		}
	}
	return blocking
}

// isCollective: the first two parameters are a context.Context and a
// *Comm.
func isCollective(fd *ast.FuncDecl) bool { return testkit.TakesCtxAndComm(fd) }

// returnsHandle: the only result is *Work.
func returnsHandle(fd *ast.FuncDecl) bool { return testkit.ReturnsPointerTo(fd, "Work") }

// TestStartFormsOfCoalescedInferenceAndBarrier runs the Start forms
// issue 14 added, all in flight at once, and checks their results.
func TestStartFormsOfCoalescedInferenceAndBarrier(t *testing.T) {
	const n = 3
	world := localWorld(t, n)
	errs := testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// Numeric Start forms: all started, then waited together.
		a, b := []int32{int32(r), 1}, []int32{10 * int32(r)}
		sends := [][]float64{{float64(r)}, {float64(r), float64(-r)}}
		recvs := [][]float64{make([]float64, n), make([]float64, 2*n)}
		inf := make([]int64, 2)
		w1 := comm.StartAllReduceCoalesced(ctx, c, [][]int32{a, b}, comm.Sum)
		w2 := comm.StartAllGatherCoalesced(ctx, c, sends, recvs)
		w3 := comm.StartInferenceAllReduce(ctx, c, []int64{int64(r), 2}, inf, comm.Max)
		w4 := comm.StartMonitoredBarrier(ctx, c, 10*time.Second, true)
		if err := comm.WaitAll(ctx, w1, w2, w3, w4); err != nil {
			return err
		}
		if !slices.Equal(a, []int32{0 + 1 + 2, n}) || !slices.Equal(b, []int32{30}) {
			return fmt.Errorf("StartAllReduceCoalesced: got %v %v", a, b)
		}
		if !slices.Equal(recvs[0], []float64{0, 1, 2}) || !slices.Equal(recvs[1], []float64{0, 0, 1, -1, 2, -2}) {
			return fmt.Errorf("StartAllGatherCoalesced: got %v %v", recvs[0], recvs[1])
		}
		if !slices.Equal(inf, []int64{2, 2}) {
			return fmt.Errorf("StartInferenceAllReduce: got %v", inf)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}

// TestStartAllGatherCoalescedBadArgumentFailsEveryRank: one rank's bad
// buffers fail the collective on every rank, promptly, with the reason.
func TestStartAllGatherCoalescedBadArgumentFailsEveryRank(t *testing.T) {
	world := localWorld(t, 3)
	errs := testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		recvs := [][]int8{make([]int8, 3)}
		if r == 1 {
			recvs[0] = recvs[0][:2]
		}
		err := comm.StartAllGatherCoalesced(ctx, c, [][]int8{{1}}, recvs).Wait()
		if ctx.Err() != nil {
			return errors.New("rank waited for the timeout")
		}
		return err
	})
	wantIs(t, 1, errs[1], comm.ErrInvalid, "len(recvs[0]) = 2")
	for _, r := range []int{0, 2} {
		wantIs(t, r, errs[r], comm.ErrAborted, "rank 1", "len(recvs[0]) = 2")
	}
}

// TestStartMonitoredBarrierNamesLateRank: the Start form reports a late
// rank as the blocking form does.
func TestStartMonitoredBarrierNamesLateRank(t *testing.T) {
	world := localWorld(t, 3)
	errs := testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if r == 2 {
			// Well past the barrier's timeout, so that a rank 0 or 1
			// descheduled on a loaded machine is not late too.
			time.Sleep(2500 * time.Millisecond)
		}
		return comm.StartMonitoredBarrier(ctx, c, time.Second, true).Wait()
	})
	for r, err := range errs {
		wantIs(t, r, err, comm.ErrBarrierTimeout, "rank(s) 2")
	}
}

// TestWaitAll covers nil entries, works already done, the errors joined
// with their index, and an ended ctx that leaves the works running.
func TestWaitAll(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	done := comm.StartFunc(func() error { return nil })
	failed := comm.StartFunc(func() error { return boom })
	done.Wait()
	failed.Wait()
	if err := comm.WaitAll(ctx); err != nil {
		t.Fatalf("WaitAll of nothing = %v", err)
	}
	if err := comm.WaitAll(ctx, nil, done, nil); err != nil {
		t.Fatalf("WaitAll(nil, done, nil) = %v", err)
	}
	err := comm.WaitAll(ctx, done, nil, failed)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "work 2: boom") {
		t.Fatalf("WaitAll(done, nil, failed) = %v, want boom at index 2", err)
	}

	release := make(chan struct{})
	slow := comm.StartFunc(func() error { <-release; return nil })
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = comm.WaitAll(cctx, done, slow)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 of 2 works not done") {
		t.Fatalf("WaitAll past the deadline = %v", err)
	}
	if slow.Err() != nil || isDone(slow) {
		t.Fatal("WaitAll's ended ctx touched the work")
	}
	// An ended ctx keeps the errors of works already found failed.
	err = comm.WaitAll(cctx, failed, slow)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, boom) || !strings.Contains(err.Error(), "work 0: boom") {
		t.Fatalf("WaitAll(failed, slow) past the deadline = %v, want boom and the deadline", err)
	}
	// Works already done win over an ended ctx.
	if err := comm.WaitAll(cctx, done); err != nil {
		t.Fatalf("WaitAll(ended ctx, done) = %v", err)
	}
	close(release)
	if err := comm.WaitAll(ctx, slow, done); err != nil {
		t.Fatal(err)
	}
}

// TestWaitAny covers nil entries, the lowest done index, the done work's
// error, no work at all and an ended ctx.
func TestWaitAny(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	release := make(chan struct{})
	defer close(release)
	slow := comm.StartFunc(func() error { <-release; return nil })
	failed := comm.StartFunc(func() error { return boom })
	done := comm.StartFunc(func() error { return nil })
	failed.Wait()
	done.Wait()

	if i, err := comm.WaitAny(ctx, nil, slow, failed, done); i != 2 || !errors.Is(err, boom) {
		t.Fatalf("WaitAny(nil, slow, failed, done) = %d, %v; want 2, boom", i, err)
	}
	if i, err := comm.WaitAny(ctx, slow, done); i != 1 || err != nil {
		t.Fatalf("WaitAny(slow, done) = %d, %v; want 1, nil", i, err)
	}
	if i, err := comm.WaitAny(ctx, nil, nil); i != -1 || !errors.Is(err, comm.ErrInvalid) {
		t.Fatalf("WaitAny(nil, nil) = %d, %v; want -1, ErrInvalid", i, err)
	}
	if i, err := comm.WaitAny(ctx); i != -1 || !errors.Is(err, comm.ErrInvalid) {
		t.Fatalf("WaitAny() = %d, %v; want -1, ErrInvalid", i, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if i, err := comm.WaitAny(cctx, slow); i != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAny(slow) past the deadline = %d, %v", i, err)
	}
	// A work that finishes while WaitAny waits.
	later := comm.StartFunc(func() error { time.Sleep(10 * time.Millisecond); return boom })
	if i, err := comm.WaitAny(ctx, slow, later); i != 1 || !errors.Is(err, boom) {
		t.Fatalf("WaitAny(slow, later) = %d, %v; want 1, boom", i, err)
	}
}

func isDone(w *comm.Work) bool {
	select {
	case <-w.Done():
		return true
	default:
		return false
	}
}
