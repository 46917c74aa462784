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
