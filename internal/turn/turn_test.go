package turn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestOrder: collectives that reach Wait in any order start in sequence
// order, one at a time.
func TestOrder(t *testing.T) {
	var tu Turn
	const n = 200
	var mu sync.Mutex
	var order []uint64
	var wg sync.WaitGroup
	for i := n; i >= 1; i-- {
		seq := uint64(i)
		wg.Go(func() {
			if err := tu.Wait(context.Background(), seq, nil, nil, nil); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, seq)
			mu.Unlock()
			tu.Advance(seq)
		})
	}
	wg.Wait()
	for i, s := range order {
		if s != uint64(i+1) {
			t.Fatalf("started %v, want 1..%d in order", order, n)
		}
	}
}

// TestWaitEnds: a wait ends with ctx, the failed and closed channels, and
// a sequence number already let go is an error.
func TestWaitEnds(t *testing.T) {
	var tu Turn
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tu.Wait(ctx, 2, nil, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
	failed := make(chan struct{})
	close(failed)
	if err := tu.Wait(context.Background(), 2, failed, nil, nil); err != ErrFailed {
		t.Fatalf("failed: %v", err)
	}
	closed := make(chan struct{})
	close(closed)
	errClosed := errors.New("closed")
	if err := tu.Wait(context.Background(), 2, nil, closed, errClosed); err != errClosed {
		t.Fatalf("closed: %v", err)
	}
	if err := tu.Wait(context.Background(), 0, nil, nil, nil); err != nil {
		t.Fatalf("seq 0: %v", err)
	}
	tu.Advance(1)
	if err := tu.Wait(context.Background(), 1, nil, nil, nil); err == nil {
		t.Fatal("a sequence number let go already waited without error")
	}
}
