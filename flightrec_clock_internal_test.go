package comm

import (
	"testing"
	"time"

	"github.com/gocomm/comm/backend"
)

// internal/clock may step back by the error a correction of its rate
// removes (microseconds): an operation that straddles the correction must
// not be recorded as leaving before it entered. The entry's enter is moved
// ahead of the clock to stand for that step.
func TestFlightRecorderExitNotBeforeEnter(t *testing.T) {
	r := newFlightRecorder(1, 0, []int{0})
	ord := r.enter(&backend.Request{Kind: backend.KindBarrier, Seq: 1})
	r.mu.Lock()
	r.ring[ord%flightRingSize].enter += time.Hour
	r.mu.Unlock()
	r.exit(ord, nil)
	fc := r.snapshot(0)
	if len(fc.Recent) != 1 {
		t.Fatalf("recent %+v", fc.Recent)
	}
	if op := fc.Recent[0]; op.Exited.Before(op.Entered) {
		t.Errorf("exited %v before it entered %v", op.Exited, op.Entered)
	}
}
