package comm

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestOpContextDeadline(t *testing.T) {
	o := withOpTimeout(context.Background(), 30*time.Millisecond)
	if d, ok := o.Deadline(); !ok || time.Until(d) > 30*time.Millisecond || time.Until(d) < 0 {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	if err := o.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	select {
	case <-o.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if !errors.Is(o.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v, want DeadlineExceeded", o.Err())
	}
	o.release()
}

// Polling Err alone (no Done) sees the deadline within 16 calls. The
// deadline counts from the 16th call, the first that reads the clock.
func TestOpContextErrPolls(t *testing.T) {
	o := withOpTimeout(context.Background(), time.Millisecond)
	defer o.release()
	for range 16 {
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if o.deadline.IsZero() {
		t.Fatal("16 calls of Err did not fix the deadline")
	}
	time.Sleep(2 * time.Millisecond)
	var err error
	for range 16 {
		if err = o.Err(); err != nil {
			break
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err after the deadline = %v", err)
	}
	select {
	case <-o.Done():
	default:
		t.Error("Done open although Err reports the deadline")
	}
}

func TestOpContextParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), logNameKey{}, "x"))
	o := withOpTimeout(parent, time.Hour)
	if o.Value(logNameKey{}) != "x" {
		t.Error("Value does not reach the parent")
	}
	child, stop := context.WithCancel(o)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the parent's cancel did not reach a context derived from the op's")
	}
	if !errors.Is(o.Err(), context.Canceled) {
		t.Errorf("Err = %v, want Canceled", o.Err())
	}
	o.release()
}

// A context whose Done channel something outside the operation may
// watch (a derived context, context.AfterFunc) is not reused: whoever
// watches it sees it cancelled, never another operation's state.
func TestOpContextReleasedWhileWatched(t *testing.T) {
	o := withOpTimeout(context.Background(), time.Hour)
	child, stop := context.WithCancel(o)
	defer stop()
	o.release()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from a released one is not cancelled")
	}
	if o.Err() == nil {
		t.Error("a released context reports no error")
	}
	for range 100 {
		p := withOpTimeout(context.Background(), time.Hour)
		if p == o {
			t.Fatal("a watched context was recycled")
		}
		p.release()
	}
}

// A context whose channel only the operation took keeps the channel and
// the timer for the next operation, whose deadline they serve; one whose
// timer fired is not reused.
func TestOpContextReusesChannelAndTimer(t *testing.T) {
	o := &opContext{parent: context.Background(), timeout: time.Hour}
	done := o.Done()
	timer := o.timer
	if !o.recycle() {
		t.Fatal("a context whose channel only its operation took is not reused")
	}
	select {
	case <-done:
		t.Fatal("the channel of a context released unwatched was closed")
	default:
	}
	// The next operation, as withOpTimeout starts it.
	o.parent, o.timeout = context.Background(), 20*time.Millisecond
	if o.Err() != nil {
		t.Fatalf("a reused context starts with error %v", o.Err())
	}
	if got := o.Done(); got != done || o.timer != timer {
		t.Fatal("a reused context made a new channel or timer")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the reused timer did not end the next operation at its deadline")
	}
	if !errors.Is(o.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", o.Err())
	}
	if o.recycle() {
		t.Fatal("a context whose deadline passed is reused")
	}
}

// A timer stopped by release never ends a later operation: the reused
// context of an operation that outlives the first's deadline stays live.
func TestOpContextStaleTimer(t *testing.T) {
	o := &opContext{parent: context.Background(), timeout: 30 * time.Millisecond}
	o.Done()
	if !o.recycle() {
		t.Fatal("a context whose channel only its operation took is not reused")
	}
	o.parent, o.timeout = context.Background(), time.Hour
	done := o.Done()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("the first operation's deadline ended the second (%v)", o.Err())
	default:
	}
	o.recycle()
}

// context.AfterFunc on an op's context registers with it (no goroutine
// waiting on Done per call): it runs on the deadline, and stop works.
func TestOpContextAfterFunc(t *testing.T) {
	o := withOpTimeout(context.Background(), 200*time.Millisecond)
	ran := make(chan struct{})
	context.AfterFunc(o, func() { close(ran) })
	stopped := context.AfterFunc(o, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Error("stop before the deadline reported false")
	}
	o.mu.Lock()
	registered := len(o.funcs)
	o.mu.Unlock()
	if registered > 1 {
		t.Errorf("%d functions registered, want at most 1", registered)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterFunc did not run at the deadline")
	}
	o.release()
}

// An operation that ends within 15 polls never reads the clock: Err
// leaves the deadline unset until its 16th call.
func TestOpContextErrReadsNoClockAtFirst(t *testing.T) {
	o := withOpTimeout(context.Background(), time.Minute)
	defer o.release()
	for range 15 {
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if !o.deadline.IsZero() {
		t.Error("Err read the clock before its 16th call")
	}
}
