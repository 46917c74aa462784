package testkit

import (
	"sync"
	"testing"
)

// Closer is what a member of a world is: a communicator or an endpoint.
type Closer interface {
	comparable
	Close() error
}

// World returns the world open builds (the ranks of one job, all in this
// process), failing the test if open fails, and closes every rank at
// once when the test ends. The ranks belong to the test until then.
//
//	w := testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(3, opts) })
func World[C Closer](t testing.TB, open func() ([]C, error)) []C {
	t.Helper()
	w, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { CloseAll(w) })
	return w
}

// CloseAll closes every rank of world at once (a rank's Close may wait
// for its peers) and returns when all have closed. Nil ranks are skipped;
// the errors are dropped, as a test's cleanup has no use for them.
func CloseAll[C Closer](world []C) {
	var wg sync.WaitGroup
	for _, c := range world {
		var none C
		if c != none {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

// OnEveryRank runs f on every rank of world at once, each in its own
// goroutine, and returns the errors by rank when all have returned.
func OnEveryRank[C any](world []C, f func(rank int, c C) error) []error {
	errs := make([]error, len(world))
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Go(func() { errs[r] = f(r, c) })
	}
	wg.Wait()
	return errs
}

// NoErrors fails the test with every rank's error in errs, naming the rank.
func NoErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
