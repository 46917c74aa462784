package comm

import (
	"testing"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// internal/clock may step back by the error a correction of its rate
// removes (microseconds): an operation that straddles the correction must
// not be recorded as leaving before it entered. The ticket's enter is moved
// ahead of the clock to stand for that step.
func TestFlightRecorderExitNotBeforeEnter(t *testing.T) {
	r := newFlightRecorder(1, 0, []int{0})
	t0 := r.enter(&backend.Request{Kind: core.KindBarrier, Seq: 1})
	t0.enter += time.Hour
	r.exit(t0, nil)
	fc := r.snapshot(0)
	if len(fc.Recent) != 1 {
		t.Fatalf("recent %+v", fc.Recent)
	}
	if op := fc.Recent[0]; op.State != "done" || op.Exited.Before(op.Entered) {
		t.Errorf("exited %v before it entered %v", op.Exited, op.Entered)
	}
}

// An operation the ring has moved past may still leave: its exit must
// not mark the operation that now holds its slot as ended, nor count it.
func TestFlightRecorderLateExit(t *testing.T) {
	r := newFlightRecorder(1, 0, []int{0})
	late := r.enter(&backend.Request{Kind: core.KindBarrier, Seq: 1})
	for i := range flightRingSize - 1 {
		r.exit(r.enter(&backend.Request{Kind: core.KindBarrier, Seq: uint64(i + 2)}), nil)
	}
	now := r.enter(&backend.Request{Kind: core.KindBarrier, Seq: flightRingSize + 1}) // late's slot
	r.exit(late, nil)
	fc := r.snapshot(0)
	if len(fc.Pending) != 1 || fc.Pending[0].Seq != flightRingSize+1 {
		t.Fatalf("pending %+v, want the operation that took the slot", fc.Pending)
	}
	if fc.Completed != flightRingSize-1 {
		t.Errorf("completed %d, want %d", fc.Completed, flightRingSize-1)
	}
	r.exit(now, nil)
	if fc := r.snapshot(0); len(fc.Pending) != 0 || fc.Completed != flightRingSize {
		t.Errorf("after its exit: pending %+v, completed %d", fc.Pending, fc.Completed)
	}
}
