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

// wantInvalid fails t unless err wraps comm.ErrInvalid and says each of
// says.
func wantInvalid(t *testing.T, what string, err error, says ...string) {
	t.Helper()
	if !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("%s: %v, want comm.ErrInvalid", what, err)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %v, want it to say %q", what, err, s)
		}
	}
}

// TestBadInput: bad arguments are errors that say what to fix, never
// panics, and do not break the step they occur in.
func TestBadInput(t *testing.T) {
	w, err := comm.NewLocalWorld(1, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(w)
	c := w[0]
	ctx := context.Background()

	_, err = ddp.New[float32](ctx, nil, shapesA, ddp.Options{})
	wantInvalid(t, "New(nil comm)", err, "nil *comm.Comm")
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = ddp.New[float32](nil, c, shapesA, ddp.Options{})
	wantInvalid(t, "New(nil ctx)", err, "nil context")
	_, err = ddp.New[float32](ctx, c, [][]int{{3}, {4, -1}}, ddp.Options{})
	wantInvalid(t, "New(negative shape)", err, "gradient 1 [4 -1]", "negative")
	_, err = ddp.New[float32](ctx, c, nil, ddp.Options{})
	wantInvalid(t, "New(no shapes)", err, "no gradients")
	_, err = ddp.New[float32](ctx, c, [][]int{{1 << 40, 1 << 40}}, ddp.Options{})
	wantInvalid(t, "New(huge shape)", err, "gradient 0", "memory")
	_, err = ddp.New[float32](ctx, c, shapesA, ddp.Options{BucketCapBytes: -1})
	wantInvalid(t, "New(negative cap)", err, "BucketCapBytes")

	for _, zero := range []*ddp.Reducer[float32]{nil, new(ddp.Reducer[float32])} {
		wantInvalid(t, "Ready on a zero Reducer", zero.Ready(ctx, 0), "not made by New")
		wantInvalid(t, "Wait on a zero Reducer", zero.Wait(ctx), "not made by New")
		wantInvalid(t, "SetHook on a zero Reducer", zero.SetHook(ddp.AllReduceHook[float32]()), "not made by New")
		zero.SetSync(false)
		zero.ZeroGrad()
		if zero.Grad(0) != nil || zero.Len() != 0 || len(zero.Buckets()) != 0 {
			t.Error("a zero Reducer has gradients")
		}
	}

	r, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Grad(-1) != nil || r.Grad(r.Len()) != nil || r.Shape(-1) != nil {
		t.Error("Grad or Shape out of range is not nil")
	}
	wantInvalid(t, "SetHook(nil)", r.SetHook(nil), "SetHook(nil)")
	wantInvalid(t, "Ready(-1)", r.Ready(ctx, -1), "Ready(-1)", "10 gradients")
	wantInvalid(t, "Ready(10)", r.Ready(ctx, 10), "Ready(10)")
	//lint:ignore SA1012 a nil context is the bad input under test
	wantInvalid(t, "Ready(nil ctx)", r.Ready(nil, 0), "nil context")
	if err := r.Ready(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, "Ready twice", r.Ready(ctx, 4), "gradient 4 [40]", "already marked")
	wantInvalid(t, "SetHook during a step", r.SetHook(ddp.AllReduceHook[float32]()), "during a step")
	//lint:ignore SA1012 a nil context is the bad input under test
	wantInvalid(t, "Wait(nil ctx)", r.Wait(nil), "nil context")
	// The step goes on.
	for i := range r.Len() {
		if i != 4 {
			if err := r.Ready(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// A hook that returns no Work fails the step, and the Reducer after it.
	if err := r.SetHook(func(context.Context, *comm.Comm, *ddp.Bucket[float32]) *comm.Work { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range r.Len() {
		if err := r.Ready(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	wantInvalid(t, "a nil Work", r.Wait(ctx), "nil *comm.Work")
	if err := r.Ready(ctx, 0); err == nil || !strings.Contains(err.Error(), "earlier step failed") {
		t.Errorf("Ready after a failed step: %v", err)
	}
}

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
