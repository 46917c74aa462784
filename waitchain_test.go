package comm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/transport"
)

// TestTimeoutNamesTheEndOfTheWaitChain: in a ring all-reduce that rank 2
// never joins, rank 0 waits for rank 2 and rank 1 waits for rank 0. Every
// rank's error arrives at the timeout, not a grace period later, and
// names rank 2: rank 1 learned whom rank 0 waits for before its own timer
// ended.
func TestTimeoutNamesTheEndOfTheWaitChain(t *testing.T) {
	const timeout = 2 * time.Second
	w := tcpWorld(t, 3, comm.Options{Timeout: timeout, Algorithms: comm.Algorithms{AllReduce: comm.Ring}})
	ctx := context.Background()
	errs := make([]error, 2)
	took := make([]time.Duration, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			buf := make([]float32, 3<<10)
			start := time.Now()
			errs[r] = comm.AllReduce(ctx, w[r], buf, buf, comm.Sum)
			took[r] = time.Since(start)
		})
	}
	wg.Wait()
	for r, err := range errs {
		t.Logf("rank %d after %v: %v", r, took[r].Round(time.Millisecond), err)
		if err == nil {
			t.Fatalf("rank %d: the all-reduce without rank 2 succeeded", r)
		}
		// The exchange of flight recorders follows the timeout, for at
		// most its grace (200 ms here); every rank answers it.
		if limit := timeout + 500*time.Millisecond; took[r] > limit {
			t.Errorf("rank %d failed after %v, more than %v", r, took[r], limit)
		}
		var ra *transport.RemoteAbortError
		switch {
		case errors.As(err, &ra):
			if ra.Origin != 2 {
				t.Errorf("rank %d was aborted naming rank %d first, want rank 2", r, ra.Origin)
			}
		case r == 0 && !strings.Contains(err.Error(), "waiting for rank 2 "),
			r == 1 && !strings.Contains(err.Error(), "rank 2 is slow, stuck, unreachable, or not calling this collective"):
			t.Errorf("rank %d's error does not blame rank 2", r)
		}
	}
	var ra *transport.RemoteAbortError
	if !errors.As(errs[1], &ra) && !strings.Contains(errs[1].Error(), "waiting for rank 0 (AllReduce(float32, count 3072, Sum)), which is waiting for rank 2") {
		t.Errorf("rank 1's error does not say that rank 0 is waiting for rank 2")
	}
}
