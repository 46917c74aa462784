//go:build mpi && cgo

package mpi

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGate: close counts the operations inside, refuses new ones, and wait
// returns once the last has left, also when operations race with close.
func TestGate(t *testing.T) {
	g := gate{closedCh: make(chan struct{})}
	if !g.enter() || !g.enter() {
		t.Fatal("an open gate refused an operation")
	}
	if n := g.close(); n != 2 {
		t.Fatalf("close with 2 inside returned %d", n)
	}
	if g.enter() {
		t.Fatal("a closed gate let an operation in")
	}
	if n := g.close(); n != -1 {
		t.Fatalf("second close returned %d, want -1", n)
	}
	done := make(chan struct{})
	go func() { g.wait(); close(done) }()
	g.leave()
	select {
	case <-done:
		t.Fatal("wait returned with an operation inside")
	case <-time.After(20 * time.Millisecond):
	}
	g.leave()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return after the last operation left")
	}

	for round := range 200 {
		g := gate{closedCh: make(chan struct{})}
		var inside atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g.enter() {
					inside.Add(1)
					inside.Add(-1)
					g.leave()
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 10 * time.Microsecond)
		g.close()
		g.wait()
		if n := inside.Load(); n != 0 {
			t.Fatalf("round %d: wait returned with %d operations inside", round, n)
		}
		wg.Wait()
	}
}
