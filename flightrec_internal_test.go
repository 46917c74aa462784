package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/rendezvous"
)

// headOf builds what a rank posts: its ops on communicator 1.
func headOf(rank int, ops ...FlightOp) FlightRecord {
	fc := FlightComm{ID: 1, Rank: rank, Recent: ops}
	for _, op := range ops {
		if op.State == "pending" {
			fc.Pending = append(fc.Pending, op)
		}
	}
	return FlightRecord{Rank: rank, Comms: []FlightComm{fc}}
}

// The example: ranks 2 and 3 never entered all-reduce #42, one
// having left broadcast #41 and the other still inside barrier #40; rank 4
// never answers, rank 5 is known lost.
func TestAnalyzeDesync(t *testing.T) {
	inc := flightIncident{Comm: 1, Seq: 42, Op: "all_reduce", Rank: 0, Ranks: []int{0, 1, 2, 3, 4, 5}}
	heads := map[int]FlightRecord{
		0: headOf(0, FlightOp{Seq: 41, Op: "broadcast", State: "done"}, FlightOp{Seq: 42, Op: "all_reduce", State: "failed"}),
		1: headOf(1, FlightOp{Seq: 42, Op: "all_reduce", State: "pending"}),
		2: headOf(2, FlightOp{Seq: 40, Op: "barrier", State: "done"}, FlightOp{Seq: 41, Op: "broadcast", State: "done"}),
		3: headOf(3, FlightOp{Seq: 40, Op: "barrier", State: "pending"}),
	}
	d := analyzeDesync(inc, heads, []int{5}, time.Second)
	for _, c := range []struct {
		name      string
		got, want []int
	}{
		{"never entered", d.NeverEntered, []int{2, 3}},
		{"inside", d.Inside, []int{0, 1}},
		{"completed", d.Completed, nil},
		{"no answer", d.NoAnswer, []int{4}},
		{"dead", d.Dead, []int{5}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, want := range []string{
		"timed out in all_reduce #42",
		"ranks 2,3 never entered it (rank 2 last entered broadcast #41 (done), rank 3 is inside barrier #40)",
		"ranks 0,1 entered it and did not complete it",
		"rank 4 did not answer within 1s",
		"rank 5 gone",
	} {
		if !strings.Contains(d.Detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, d.Detail)
		}
	}
	// A rank past the operation (it left the ring) completed it.
	heads[2] = headOf(2, FlightOp{Seq: 43, Op: "barrier", State: "done"})
	if d := analyzeDesync(inc, heads, nil, time.Second); !slices.Equal(d.Completed, []int{2}) {
		t.Errorf("rank past the op: completed %v, want [2]", d.Completed)
	}
}

func TestDeadRanksAndTimeoutCause(t *testing.T) {
	lost := &core.OpError{Op: core.KindAllReduce, Rank: 0, Peer: 2, Err: &core.AbortError{Cause: &core.PeerError{Peer: 2, Err: core.ErrPeerLost}}}
	if got := deadRanks(fmt.Errorf("wrapped: %w", errors.Join(lost, &core.PeerError{Peer: 3, Err: core.ErrPeerLost}))); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("deadRanks = %v, want [2 3]", got)
	}
	if got := deadRanks(&core.PeerError{Peer: 1, Err: core.ErrPeerClosed}); !slices.Equal(got, []int{1}) {
		t.Errorf("a closed peer is gone too: %v", got)
	}
	if got := deadRanks(&core.PeerError{Peer: 1, Err: core.ErrMismatch}); got != nil {
		t.Errorf("a mismatched peer is alive: %v", got)
	}
	if got := deadRanks(&core.OpError{Err: &core.RemoteAbortError{Peer: 1, Origin: 3, Kind: core.FailLost, Reporter: 1}}); !slices.Equal(got, []int{3}) {
		t.Errorf("a peer's abort naming a lost rank: %v, want [3]", got)
	}
	if got := deadRanks(&core.RemoteAbortError{Peer: 1, Origin: 3, Kind: core.FailTimeout, Reporter: 1}); got != nil {
		t.Errorf("a rank that timed out may be alive: %v", got)
	}
	if own, remote := timeoutCause(&core.OpError{Err: fmt.Errorf("%w at step 0", context.DeadlineExceeded)}); !own || remote {
		t.Errorf("own timeout: %v %v", own, remote)
	}
	ra := &core.RemoteAbortError{Peer: 1, Reason: "comm: AllReduce (seq 3) on rank 1: context deadline exceeded at step 0"}
	if own, remote := timeoutCause(&core.OpError{Err: ra}); own || !remote {
		t.Errorf("remote timeout: %v %v", own, remote)
	}
	if own, remote := timeoutCause(&core.OpError{Err: &core.RemoteAbortError{Peer: 1, Reason: "rank 2: peer connection lost"}}); own || remote {
		t.Errorf("remote loss: %v %v", own, remote)
	}
	if own, remote := timeoutCause(&core.RemoteAbortError{Peer: 1, Reason: "late", Origin: 2, Kind: core.FailTimeout}); own || !remote {
		t.Errorf("remote timeout by kind: %v %v", own, remote)
	}
}

// The ring records what entered and left, drops nothing it still holds,
// and keeps pending operations older than its window.
func TestFlightRecorderRing(t *testing.T) {
	r := newFlightRecorder(7, 1, []int{3, 5})
	stuck := r.enter(&backend.Request{Kind: core.KindBarrier, Seq: 1})
	_ = stuck
	for i := range flightRingSize - 1 {
		req := &backend.Request{Kind: core.KindAllReduce, Seq: uint64(i + 2), DType: core.Float32, Op: core.Sum, Send: make([]byte, 8), Recv: make([]byte, 8)}
		r.exit(r.enter(req), nil)
	}
	fc := r.snapshot(4)
	if fc.ID != 7 || fc.Rank != 1 || !slices.Equal(fc.Ranks, []int{3, 5}) || fc.LastSeq != flightRingSize || fc.Ops != flightRingSize {
		t.Fatalf("snapshot header %+v", fc)
	}
	if len(fc.Recent) != 4 || fc.Recent[3].Seq != flightRingSize || fc.Recent[3].State != "done" || fc.Recent[3].Reduce != "Sum" {
		t.Errorf("recent %+v", fc.Recent)
	}
	if len(fc.Pending) != 1 || fc.Pending[0].Op != "barrier" {
		t.Errorf("pending %+v", fc.Pending)
	}
	if want := int64(8 * (flightRingSize - 1)); fc.BytesSent != want || fc.BytesReceived != want {
		t.Errorf("bytes %d/%d, want %d", fc.BytesSent, fc.BytesReceived, want)
	}
	// One more overwrites the barrier's slot: its exit is forgotten.
	r.exit(r.enter(&backend.Request{Kind: core.KindBroadcast, Seq: flightRingSize + 1, Root: 1}), errors.New("boom"))
	r.exit(stuck, nil)
	fc = r.snapshot(0)
	if len(fc.Pending) != 0 || len(fc.Recent) != flightRingSize {
		t.Errorf("after wrap: %d pending, %d recent", len(fc.Pending), len(fc.Recent))
	}
	if last := fc.Recent[len(fc.Recent)-1]; last.State != "failed" || last.Error != "boom" || last.Root != 1 {
		t.Errorf("last %+v", last)
	}
}

// Survivors agree on one membership; a rank known dead is not waited for
// (the settle time is an hour: waiting would hit ctx), and a rank that
// comes after the decision is told it was left out.
func TestAgreeSurvivors(t *testing.T) {
	store := rendezvous.NewMemStore()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make([][]int, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for _, r := range []int{0, 1, 3} {
		wg.Go(func() {
			dead := []int{}
			if r == 3 {
				dead = []int{2} // only rank 3 saw rank 2 go
			}
			got[r], errs[r] = agreeSurvivors(ctx, store, "t/1", 4, r, dead, time.Hour)
		})
	}
	wg.Wait()
	for _, r := range []int{0, 1, 3} {
		if errs[r] != nil || !slices.Equal(got[r], []int{0, 1, 3}) {
			t.Errorf("rank %d: %v, %v; want [0 1 3]", r, got[r], errs[r])
		}
	}
	late, err := agreeSurvivors(ctx, store, "t/1", 4, 2, nil, time.Hour)
	if err != nil || slices.Contains(late, 2) {
		t.Errorf("late rank 2: %v, %v", late, err)
	}
	// Nobody known dead: the settle time decides.
	short, err := agreeSurvivors(ctx, store, "t/2", 3, 1, nil, 50*time.Millisecond)
	if err != nil || !slices.Equal(short, []int{1}) {
		t.Errorf("alone after settling: %v, %v", short, err)
	}
	// No decision before ctx ends: an error that says so.
	quick, qcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer qcancel()
	if _, err := agreeSurvivors(quick, store, "t/3", 3, 1, nil, time.Hour); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("undecided: %v", err)
	}
}

// BenchmarkFlightRecorder is the recorder's share of every operation: one
// enter and one exit (compare BenchmarkProfileHook/ranks=1/off, the whole
// call path of an operation in a world of one, built before and after).
func BenchmarkFlightRecorder(b *testing.B) {
	r := newFlightRecorder(1, 0, []int{0})
	req := &backend.Request{Kind: core.KindAllReduce, Seq: 1, DType: core.Float32, Send: make([]byte, 8), Recv: make([]byte, 8)}
	b.ReportAllocs()
	for b.Loop() {
		r.exit(r.enter(req), nil)
	}
}
