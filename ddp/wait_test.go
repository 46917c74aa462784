package ddp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// TestWaitContext: a Wait whose context ends while buckets are still
// being reduced returns the context's error and leaves the Reducer
// unusable.
func TestWaitContext(t *testing.T) {
	w, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	ctx := context.Background()
	errs := onEveryRank(w, func(rank int, c *comm.Comm) error {
		r, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{})
		if err != nil {
			return err
		}
		if rank == 1 {
			return nil // never takes part in the step
		}
		for i := range r.Len() {
			if err := r.Ready(ctx, i); err != nil {
				return err
			}
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err = r.Wait(short)
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		c.Abort(err) // ends the pending bucket
		if err := r.Wait(ctx); err == nil || !strings.Contains(err.Error(), "earlier step failed") {
			return errors.New("Wait after a failed step did not say so")
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}
