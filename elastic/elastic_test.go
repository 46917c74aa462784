package elastic_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/elastic"
	"github.com/gocomm/comm/internal/commtest"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// world starts n ranks over TCP on loopback meeting through store.
func world(t *testing.T, store rendezvous.Store, n int) []*comm.Comm {
	t.Helper()
	return commtest.WorldOn(t, store, n, comm.Options{Timeout: 20 * time.Second}, nil)
}

const steps = 40

// trainStep is one step of a toy model: every rank's gradient depends on
// the step only, so the average, and the parameters after any number of
// steps, do not depend on the world's size or history.
func trainStep(st *elastic.State, params []float32, hook func(c *comm.Comm) error) func(ctx context.Context, c *comm.Comm) (bool, error) {
	return func(ctx context.Context, c *comm.Comm) (bool, error) {
		if err := hook(c); err != nil {
			return false, err
		}
		grad := make([]float32, len(params))
		for i := range grad {
			grad[i] = float32((int(st.Step)+i)%7) - 3
		}
		if err := comm.AllReduce(ctx, c, grad, grad, comm.Avg); err != nil {
			return false, err
		}
		for i := range params {
			params[i] -= 0.01 * grad[i]
		}
		st.Step++
		return st.Step == steps, nil
	}
}

// reference is the parameters after steps steps on one rank.
func reference() []float32 {
	params := make([]float32, 5)
	st := elastic.NewState(params)
	step := trainStep(st, params, func(*comm.Comm) error { return nil })
	w, _ := comm.NewLocalWorld(1, comm.Options{})
	defer w[0].Close()
	for done := false; !done; {
		done, _ = step(context.Background(), w[0])
	}
	return params
}

// TestRunThroughLossAndGrowth: three ranks train; rank 2 leaves at step 10
// (its communicator closed mid-job); the survivors roll back, shrink and go
// on; two newcomers join at once and take the state; the five-rank world
// finishes with parameters equal to an uninterrupted run's on every rank.
func TestRunThroughLossAndGrowth(t *testing.T) {
	store := rendezvous.NewMemStore()
	w := world(t, store, 3)
	ctx := testkit.Context(t, time.Minute)
	want := reference()

	type result struct {
		params []float32
		size   int
		err    error
	}
	results := make(chan result, 5)
	newcomers := make(chan struct{})
	var once sync.Once
	run := func(c *comm.Comm, who string) {
		params := make([]float32, 5)
		st := elastic.NewState(params)
		hook := func(c *comm.Comm) error {
			if who == "rank 2" && st.Step == 10 {
				c.Close()
				return errLeft
			}
			if st.Step == 20 {
				once.Do(func() { close(newcomers) })
				// Hold the world here until both newcomers wait in
				// Join, so that it grows before it finishes.
				for {
					n, err := store.Add(ctx, "gocomm/grow/tickets", 0)
					if err != nil || n == 2 {
						return err
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			return nil
		}
		end, err := elastic.Run(ctx, c, st, elastic.Options{}, trainStep(st, params, hook))
		if errors.Is(err, errLeft) {
			return
		}
		results <- result{params, end.Size(), err}
		end.Close()
	}
	var wg sync.WaitGroup
	for r, c := range w {
		wg.Go(func() { run(c, fmt.Sprintf("rank %d", r)) })
	}
	select {
	case <-newcomers:
	case r := <-results:
		t.Fatalf("a rank ended before step 20: %v", r.err)
	}
	for range 2 {
		wg.Go(func() {
			c, err := comm.Join(ctx, comm.Options{Store: store, Timeout: 20 * time.Second,
				Transport: comm.TransportOptions{ListenHost: "127.0.0.1"}, Getenv: func(string) string { return "" }})
			if err != nil {
				results <- result{err: err}
				return
			}
			run(c, "newcomer")
		})
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if r.err != nil {
			t.Errorf("rank: %v", r.err)
			continue
		}
		if r.size != 4 {
			t.Errorf("ended in a world of %d, want 4 (3 - 1 + 2)", r.size)
		}
		if !slices.Equal(r.params, want) {
			t.Errorf("parameters %v, want %v (an uninterrupted run's)", r.params, want)
		}
	}
	if n != 4 {
		t.Errorf("%d ranks finished, want 4", n)
	}
}

var errLeft = errors.New("this rank left")

// TestRunStopsOnOtherErrors: a step's own error ends Run with it; bad
// arguments are ErrInvalid.
func TestRunStopsOnOtherErrors(t *testing.T) {
	w := testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(1, comm.Options{}) })
	ctx := testkit.Context(t, time.Minute)
	boom := errors.New("boom")
	st := elastic.NewState()
	c, err := elastic.Run(ctx, w[0], st, elastic.Options{}, func(context.Context, *comm.Comm) (bool, error) { return false, boom })
	if !errors.Is(err, boom) || c != w[0] {
		t.Errorf("Run = %v, %v; want boom on the same communicator", c, err)
	}
	if _, err := elastic.Run(ctx, w[0], nil, elastic.Options{}, nil); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("Run without a State = %v, want ErrInvalid", err)
	}
}

// TestStateCommitRestore: Restore brings back the last Commit.
func TestStateCommitRestore(t *testing.T) {
	a := []float32{1, 2}
	st := elastic.NewState(a)
	a[0], st.Step = 5, 3
	st.Commit()
	a[1], st.Step = 9, 4
	st.Restore()
	if !slices.Equal(a, []float32{5, 2}) || st.Step != 3 {
		t.Errorf("after Restore: %v, step %d; want [5 2], step 3", a, st.Step)
	}
}

// TestRunThroughLossAfterAStep: rank 0 of 3 leaves right after its part of
// step 10 (its communicator closed once the all-reduce is done), so the
// others see the loss after a good step, in the check for newcomers (rank
// 0 broadcasts the count). They shrink and finish with an uninterrupted
// run's parameters; a loss seen in the check once ended Run early, as if
// the training were done.
func TestRunThroughLossAfterAStep(t *testing.T) {
	store := rendezvous.NewMemStore()
	w := world(t, store, 3)
	ctx := testkit.Context(t, time.Minute)
	want := reference()
	errs := testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		params := make([]float32, 5)
		st := elastic.NewState(params)
		step := trainStep(st, params, func(*comm.Comm) error { return nil })
		leaving := func(ctx context.Context, c *comm.Comm) (bool, error) {
			done, err := step(ctx, c)
			if r == 0 && st.Step == 10 {
				c.Close()
				return false, errLeft
			}
			return done, err
		}
		end, err := elastic.Run(ctx, c, st, elastic.Options{}, leaving)
		if r == 0 {
			if !errors.Is(err, errLeft) {
				return fmt.Errorf("the leaving rank: %v", err)
			}
			return nil
		}
		defer end.Close()
		switch {
		case err != nil:
			return err
		case end.Size() != 2 || st.Step != steps:
			return fmt.Errorf("ended at step %d in a world of %d, want step %d in a world of 2", st.Step, end.Size(), steps)
		case !slices.Equal(params, want):
			return fmt.Errorf("parameters %v, want %v", params, want)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}
