package opctx

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

// withTimeout is an Context from a pool of its own: not reused.
func withTimeout(parent context.Context, timeout time.Duration) *Context {
	return new(Pool).Get(parent, timeout)
}

func TestDeadline(t *testing.T) {
	o := withTimeout(context.Background(), 30*time.Millisecond)
	// internal/clock, which the deadline is read from, may run ahead of
	// the runtime's clock by microseconds.
	if d, ok := o.Deadline(); !ok || time.Until(d) > 31*time.Millisecond || time.Until(d) < 0 {
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
	o.Release()
}

// Polling Err alone (no Done) sees the deadline within 16 calls. The
// deadline counts from the 16th call, the first that reads the clock.
func TestErrPolls(t *testing.T) {
	o := withTimeout(context.Background(), time.Millisecond)
	defer o.Release()
	for range 16 {
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if o.deadline == 0 {
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

func TestParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), valueKey{}, "x"))
	o := withTimeout(parent, time.Hour)
	if o.Value(valueKey{}) != "x" {
		t.Error("Value does not reach the parent")
	}
	child, stop := context.WithCancel(o)
	defer stop()
	cancel()
	endsWith(t, o, child.Done(), context.Canceled, "a context derived from the op's, after the parent's cancel")
	o.Release()
}

// A context whose Done channel something outside the operation may
// watch (a derived context, context.AfterFunc) is not reused: whoever
// watches it sees it cancelled, never another operation's state.
func TestReleasedWhileWatched(t *testing.T) {
	var pool Pool
	o := pool.Get(context.Background(), time.Hour)
	child, stop := context.WithCancel(o)
	defer stop()
	o.Release()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from a released one is not cancelled")
	}
	if o.Err() == nil {
		t.Error("a released context reports no error")
	}
	for range 100 {
		p := pool.Get(context.Background(), time.Hour)
		if p == o {
			t.Fatal("a watched context was recycled")
		}
		p.Release()
	}
}

// A context whose channel only the operation took keeps the channel and
// the timer for the next operation, whose deadline they serve (a shorter
// one than the last operation's moves the timer); one whose timer ended
// it is not reused.
func TestReusesChannelAndTimer(t *testing.T) {
	o := &Context{parent: context.Background(), timeout: time.Hour}
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
	// The next operation, as withTimeout starts it.
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

// A timer left set by an earlier operation never ends a later one before
// its own deadline: it fires at the first's, finds the second's ahead and
// waits on for it.
func TestStaleTimer(t *testing.T) {
	o := &Context{parent: context.Background(), timeout: 30 * time.Millisecond}
	o.Done()
	if !o.recycle() {
		t.Fatal("a context whose channel only its operation took is not reused")
	}
	o.parent, o.timeout = context.Background(), 300*time.Millisecond
	start := time.Now()
	done := o.Done()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("the first operation's deadline ended the second (%v)", o.Err())
	default:
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the second operation did not end at its deadline")
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("the second operation ended after %v, before its 300ms deadline", waited)
	}
	if !errors.Is(o.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v, want DeadlineExceeded", o.Err())
	}
	o.recycle()
}

// context.AfterFunc on an op's context registers with it (no goroutine
// waiting on Done per call): it runs on the deadline, and stop works.
func TestAfterFunc(t *testing.T) {
	o := withTimeout(context.Background(), 200*time.Millisecond)
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
	o.Release()
}

// An operation that ends within 15 polls never reads the clock: Err
// leaves the deadline unset until its 16th call.
func TestErrReadsNoClockAtFirst(t *testing.T) {
	o := withTimeout(context.Background(), time.Minute)
	defer o.Release()
	for range 15 {
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if o.deadline != 0 {
		t.Error("Err read the clock before its 16th call")
	}
}

// countingParent is a cancellable parent that counts the watches
// registered with it (context.AfterFunc calls its AfterFunc) and those
// still registered.
type countingParent struct {
	context.Context
	mu         sync.Mutex
	registered int
	live       int
}

func newCountingParent() (*countingParent, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	return &countingParent{Context: ctx}, cancel
}

// Value hides the cancelCtx inside, which context.AfterFunc would
// register with directly.
func (p *countingParent) Value(any) any { return nil }

func (p *countingParent) AfterFunc(f func()) func() bool {
	p.mu.Lock()
	p.registered++
	p.live++
	p.mu.Unlock()
	stop := context.AfterFunc(p.Context, f)
	return func() bool {
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
		return stop()
	}
}

func (p *countingParent) counts() (registered, live int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registered, p.live
}

// The operations of a communicator that wait under one parent share one
// watch on it, which still cancels whichever operation waits when the
// parent ends.
func TestKeepsParentWatch(t *testing.T) {
	var pool Pool
	parent, cancel := newCountingParent()
	defer cancel()
	for range 100 {
		o := pool.Get(parent, time.Hour)
		o.Done()
		o.Release()
	}
	if reg, live := parent.counts(); reg != 1 || live != 1 {
		t.Fatalf("100 waiting operations registered %d watches (%d live), want 1 (1)", reg, live)
	}
	o := pool.Get(parent, time.Hour)
	done := o.Done()
	cancel()
	endsWith(t, o, done, context.Canceled, "an operation under the kept watch, after the parent's cancel")
	o.Release()
}

// A parent that ends while its watch's context is idle ends no later
// operation under another parent; an operation under the ended parent
// ends at once.
func TestParentEndsWhileIdle(t *testing.T) {
	var pool Pool
	parent, cancel := context.WithCancel(context.Background())
	o := pool.Get(parent, time.Hour)
	o.Done()
	o.Release()
	cancel()
	time.Sleep(10 * time.Millisecond) // the watch runs in a goroutine of its own
	p := pool.Get(context.Background(), time.Hour)
	if p != o {
		t.Fatal("the idle context was not reused")
	}
	done := p.Done()
	select {
	case <-done:
		t.Fatalf("an operation under a live parent ended (%v)", p.Err())
	case <-time.After(50 * time.Millisecond):
	}
	p.Release()
	q := pool.Get(parent, time.Hour)
	endsWith(t, q, q.Done(), context.Canceled, "an operation under an ended parent")
	q.Release()
}

// The pool keeps at most maxIdle contexts and stops the watches
// of those it lets go, at once when full and all when it closes: no
// parent keeps a list of contexts nobody uses.
func TestPoolLetsGo(t *testing.T) {
	var pool Pool
	parent, cancel := newCountingParent()
	defer cancel()
	held := make([]*Context, maxIdle+3)
	for i := range held {
		held[i] = pool.Get(parent, time.Hour)
		held[i].Done()
	}
	if _, live := parent.counts(); live != len(held) {
		t.Fatalf("%d live watches, want %d", live, len(held))
	}
	for _, o := range held {
		o.Release()
	}
	if _, live := parent.counts(); live != maxIdle {
		t.Fatalf("%d live watches after releasing %d into a pool of %d, want %d", live, len(held), maxIdle, maxIdle)
	}
	pool.Close()
	if _, live := parent.counts(); live != 0 {
		t.Fatalf("%d live watches after the pool closed, want 0", live)
	}
	o := pool.Get(parent, time.Hour)
	o.Done()
	o.Release()
	if _, live := parent.counts(); live != 0 {
		t.Fatalf("a context released into a closed pool keeps its watch (%d live)", live)
	}
}

// A timeout of centuries (time.Duration's largest) is no timeout: the
// deadline saturates instead of wrapping into the past.
func TestHugeTimeout(t *testing.T) {
	o := withTimeout(context.Background(), time.Duration(math.MaxInt64))
	defer o.Release()
	for range 32 {
		if err := o.Err(); err != nil {
			t.Fatalf("Err = %v with the largest timeout", err)
		}
	}
	if d, _ := o.Deadline(); time.Until(d) < 100*365*24*time.Hour {
		t.Errorf("Deadline %v, want centuries away", d)
	}
	select {
	case <-o.Done():
		t.Fatalf("Done closed with the largest timeout (%v)", o.Err())
	case <-time.After(20 * time.Millisecond):
	}
}

// endsWith checks that done closes within 5 s and that o then reports
// want.
func endsWith(t *testing.T, o *Context, done <-chan struct{}, want error, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not ended within 5s", what)
	}
	if err := o.Err(); !errors.Is(err, want) {
		t.Errorf("%s: Err = %v, want %v", what, err, want)
	}
}

// valueKey is a context key of this package's tests.
type valueKey struct{}

// An Owned's context serves every operation, allocating nothing, as long
// as nothing outside the operation watches it.
func TestOwnedReuses(t *testing.T) {
	var s Owned
	first := s.Get(context.Background(), time.Hour)
	s.Put(first)
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := testing.AllocsPerRun(100, func() {
		o := s.Get(parent, time.Hour)
		if o != first {
			t.Fatal("Owned.Get returned another context")
		}
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
		s.Put(o)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per operation, want 0", allocs)
	}
}

// Put stops the watch that a waiting operation registered on its parent:
// no parent keeps a context nobody uses. An operation waiting under the
// parent still ends when the parent does.
func TestOwnedStopsWatch(t *testing.T) {
	var s Owned
	parent, cancel := newCountingParent()
	defer cancel()
	for i := range 10 {
		o := s.Get(parent, time.Hour)
		o.Done()
		if _, live := parent.counts(); live != 1 {
			t.Fatalf("operation %d: %d live watches while waiting, want 1", i, live)
		}
		s.Put(o)
		if _, live := parent.counts(); live != 0 {
			t.Fatalf("operation %d: %d live watches after Put, want 0", i, live)
		}
	}
	o := s.Get(parent, time.Hour)
	done := o.Done()
	cancel()
	endsWith(t, o, done, context.Canceled, "an Owned operation, after the parent's cancel")
	s.Put(o)
	if p := s.Get(context.Background(), time.Hour); p == o {
		t.Error("a cancelled context was reused")
	}
}

// The deadline of an Owned operation ends it; the timer it leaves ends no
// later operation before that one's own deadline; a context derived from
// an operation's is cancelled by Put, and the context is not reused.
func TestOwnedDeadlineAndDerived(t *testing.T) {
	var s Owned
	o := s.Get(context.Background(), 20*time.Millisecond)
	endsWith(t, o, o.Done(), context.DeadlineExceeded, "an Owned operation past its deadline")
	s.Put(o)
	p := s.Get(context.Background(), 20*time.Millisecond)
	if p == o {
		t.Fatal("a context whose deadline passed was reused")
	}
	p.Done()
	s.Put(p)
	q := s.Get(context.Background(), time.Hour)
	if q != p {
		t.Fatal("an Owned context that ended in time was not reused")
	}
	done := q.Done()
	select {
	case <-done:
		t.Fatalf("the last operation's timer ended the next one (%v)", q.Err())
	case <-time.After(60 * time.Millisecond):
	}
	child, stop := context.WithCancel(q)
	defer stop()
	s.Put(q)
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from an Owned operation's was not cancelled by Put")
	}
	if r := s.Get(context.Background(), time.Hour); r == q {
		t.Error("a watched context was reused")
	}
}
