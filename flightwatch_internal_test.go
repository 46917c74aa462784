package comm

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocomm/comm/rendezvous"
)

// flakyStore fails its first fails Checks, then behaves as the store in it.
type flakyStore struct {
	rendezvous.Store
	fails  atomic.Int32
	checks atomic.Int32
}

func (s *flakyStore) Check(ctx context.Context, keys ...string) (bool, error) {
	s.checks.Add(1)
	if s.fails.Add(-1) >= 0 {
		return false, errors.New("connection reset by peer")
	}
	return s.Store.Check(ctx, keys...)
}

// TestWatcherSurvivesAFailedCheck: a store Check that fails once (a reset
// connection) does not end the watcher; it still answers a later incident
// with this rank's recorders. A store that keeps failing ends it.
func TestWatcherSurvivesAFailedCheck(t *testing.T) {
	ctx := context.Background()
	mem := rendezvous.NewMemStore()
	store := &flakyStore{Store: mem}
	store.fails.Store(2)
	f := &flightWorld{rank: 3, size: 4}
	f.startWatcher(store, time.Second, nil) // a Check every 250 ms
	defer f.stopWatcher()
	for start := time.Now(); store.checks.Load() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the watcher stopped after %d Checks, two of them failed", store.checks.Load())
		}
	}
	if err := mem.Set(ctx, flightIncidentKey, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := mem.Check(ctx, flightHeadKey+strconv.Itoa(3))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not post rank 3's recorders after two failed Checks")
		}
		time.Sleep(20 * time.Millisecond)
	}

	broken := &flakyStore{Store: rendezvous.NewMemStore()}
	broken.fails.Store(1 << 30)
	g := &flightWorld{rank: 0, size: 2}
	g.startWatcher(broken, time.Second, nil)
	select {
	case <-g.exchange.done:
	case <-time.After(10 * time.Second):
		g.stopWatcher()
		t.Fatal("the watcher kept polling a store that always fails")
	}
	if n := broken.checks.Load(); n != watcherMaxFailures {
		t.Errorf("the watcher gave up after %d Checks, want %d", n, watcherMaxFailures)
	}
}

// unreachableSetStore is a store whose Sets never get an answer (its
// server's host went behind a dead link after the Check that found the
// incident): each blocks until its ctx ends.
type unreachableSetStore struct{ rendezvous.Store }

func (s unreachableSetStore) Set(ctx context.Context, key string, value []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestWatcherPostIsBounded: a watcher that found an incident but cannot
// post its recorders (the store became unreachable) gives up within the
// exchange's grace, so the failing operation's own exchange, which waits
// for it, still ends in bounded time instead of hanging the rank.
func TestWatcherPostIsBounded(t *testing.T) {
	mem := rendezvous.NewMemStore()
	if err := mem.Set(context.Background(), flightIncidentKey, []byte(`{"comm":1,"seq":1,"op":"all_reduce","rank":0,"ranks":[0,1]}`)); err != nil {
		t.Fatal(err)
	}
	f := &flightWorld{rank: 1, size: 2}
	f.startWatcher(unreachableSetStore{mem}, time.Second, nil) // grace 200 ms, a Check every 250 ms
	defer f.stopWatcher()
	time.Sleep(400 * time.Millisecond) // the watcher found the incident and is posting
	done := make(chan string, 1)
	go func() {
		_, note := f.runExchange(nil, nil)
		done <- note
	}()
	select {
	case note := <-done:
		t.Logf("exchange: %s", note)
	case <-time.After(5 * time.Second):
		t.Fatal("the failing operation's exchange waited for the watcher's post to an unreachable store")
	}
}
