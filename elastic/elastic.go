// Package elastic keeps a data-parallel training loop going while ranks
// leave and join, in the spirit of Horovod's elastic State and run: the
// loop's state (parameters, optimizer moments, the step) is committed after
// each good step; when a rank fails, the survivors roll back to the last
// commit, shrink the world (comm.Comm.Shrink) and go on; when processes
// wait to join (comm.Join, or processes commrun --elastic restarted), the
// world grows (comm.Comm.Grow) and every rank, newcomers included, takes
// rank 0's state.
//
//	st := elastic.NewState(params, m, v)       // the tensors the loop changes
//	c, err = elastic.Run(ctx, c, st, elastic.Options{}, func(ctx context.Context, c *comm.Comm) (bool, error) {
//		// one step on c: read this rank's share of the data for c.Size(),
//		// all-reduce the gradients, update params, m, v
//		st.Step++
//		return st.Step == steps, nil
//	})
//
// A newcomer's program is the same program: its comm.Init joins the world
// (GOCOMM_JOIN=1) and its Run starts by receiving the state.
//
// Data flow: State holds the caller's slices (no copy) and a backup of
// them (Commit copies into it, Restore copies back); Sync broadcasts the
// step and every tensor from rank 0, which is always a rank that was there
// before (Grow numbers newcomers after the world's ranks, Shrink keeps the
// survivors' order).
//
// Who may import it: training programs. It is built on the public API of
// package comm only.
package elastic

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gocomm/comm"
)

// State is what a training loop must carry across a change of the world:
// float32 tensors it updates in place and the step count. Its tensors are
// the caller's slices; Commit keeps a copy to roll back to.
type State struct {
	// Step counts the committed steps; the loop advances it.
	Step    int64
	tensors [][]float32
	backup  [][]float32
	saved   int64
}

// NewState returns a State over the given tensors (the caller's slices,
// updated in place by the loop), committed as they are now.
func NewState(tensors ...[]float32) *State {
	s := &State{tensors: tensors, backup: make([][]float32, len(tensors))}
	for i, t := range tensors {
		s.backup[i] = make([]float32, len(t))
	}
	s.Commit()
	return s
}

// Commit records the tensors and the step as the state to come back to
// after a failure.
func (s *State) Commit() {
	for i, t := range s.tensors {
		copy(s.backup[i], t)
	}
	s.saved = s.Step
}

// Restore puts the tensors and the step back as they were at the last
// Commit: a step a failure interrupted may have updated some tensors on
// some ranks only.
func (s *State) Restore() {
	for i, t := range s.tensors {
		copy(t, s.backup[i])
	}
	s.Step = s.saved
}

// Sync gives every rank of c rank 0's step and tensors, and commits them.
// It is a collective; every rank's State must hold tensors of the same
// lengths.
func (s *State) Sync(ctx context.Context, c *comm.Comm) error {
	step := []int64{s.Step}
	if err := comm.Broadcast(ctx, c, step, 0); err != nil {
		return fmt.Errorf("elastic: syncing the step: %w", err)
	}
	s.Step = step[0]
	for i, t := range s.tensors {
		if err := comm.Broadcast(ctx, c, t, 0); err != nil {
			return fmt.Errorf("elastic: syncing tensor %d (%d values): %w", i, len(t), err)
		}
	}
	s.Commit()
	return nil
}

// Options tune Run.
type Options struct {
	// CheckEvery is how many steps pass between two checks for processes
	// waiting to join (comm.Comm.Joiners, one small broadcast); 0 is 1.
	CheckEvery int
	// MinSize is the fewest ranks Run goes on with after a failure; 0 is
	// 1. Below it Run returns the failure.
	MinSize int
	// MaxSize bounds the world Grow makes; Run does not grow while it
	// would pass it (0: no bound). Newcomers beyond it wait.
	MaxSize int
	// OnChange, if set, is called after every change of the world with
	// the new communicator (to rebuild what depends on it: groups, a
	// ddp.Reducer) before the next step.
	OnChange func(ctx context.Context, c *comm.Comm) error
}

// Run calls step until it reports done, keeping the world going through
// failures and growth, and returns the communicator it ended on (the
// caller closes it; Run closes the ones it replaced, c included when it
// was replaced, in the background, and waits for them before it returns). The state is synced from rank 0 first, so that a newcomer
// starts from the world's state. After each step that succeeds the state
// is committed. A step that fails because a rank was lost (comm.ErrPeerLost,
// comm.ErrPeerClosed, or comm.ErrAborted after a loss) rolls the state back, shrinks the world, syncs and goes
// on, as does a rank lost in the check for newcomers, in Grow, or while
// the world syncs after a change; any other error ends Run with it. Every CheckEvery steps, when
// processes wait in comm.Join, the world grows, every rank syncs, and the
// loop goes on with the newcomers. Every rank of c calls Run with the same
// Options.
func Run(ctx context.Context, c *comm.Comm, st *State, opts Options, step func(ctx context.Context, c *comm.Comm) (done bool, err error)) (*comm.Comm, error) {
	if c == nil || st == nil || step == nil || ctx == nil {
		return c, fmt.Errorf("%w: elastic.Run needs a ctx, a communicator, a State and a step function", comm.ErrInvalid)
	}
	every := max(opts.CheckEvery, 1)
	minSize := max(opts.MinSize, 1)
	change := func(nc *comm.Comm) error {
		if opts.OnChange != nil {
			return opts.OnChange(ctx, nc)
		}
		return nil
	}
	// The worlds Run replaces are closed in the background: an aborted
	// world's Close waits up to its close timeout for peers to hang up,
	// time the new world can train in. Run waits for them before it
	// returns.
	var closing sync.WaitGroup
	defer closing.Wait()
	retire := func(old *comm.Comm) { closing.Go(func() { old.Close() }) }
	if err := st.Sync(ctx, c); err != nil {
		return c, err
	}
	for n := 0; ; n++ {
		done, err := step(ctx, c)
		if err == nil {
			st.Commit()
			if done {
				return c, nil
			}
			if n%every != every-1 {
				continue
			}
			// err, not a new one: a failure here is handled below.
			var waiting int
			waiting, err = c.Joiners(ctx)
			if err == nil && waiting > 0 && (opts.MaxSize == 0 || c.Size() < opts.MaxSize) {
				var nc *comm.Comm
				if nc, err = c.Grow(ctx); err == nil {
					retire(c)
					c = nc
					if err = st.Sync(ctx, c); err == nil {
						err = change(c)
					}
				}
			}
			if err == nil {
				continue
			}
		}
		// A failure: a lost rank is survivable, anything else is not. A
		// rank lost while the survivors sync or rebuild is survived the
		// same way: shrink again.
		for err != nil {
			if !survivable(err) {
				return c, err
			}
			st.Restore()
			nc, serr := c.Shrink(ctx)
			if serr != nil {
				return c, fmt.Errorf("elastic: shrinking after %w: %w", err, serr)
			}
			retire(c)
			c = nc
			if c.Size() < minSize {
				return c, fmt.Errorf("elastic: %d ranks left after a failure, fewer than MinSize %d: %w", c.Size(), minSize, err)
			}
			if err = st.Sync(ctx, c); err == nil {
				err = change(c)
			}
		}
	}
}

// survivable reports whether err is a lost rank, which the others can
// shrink past.
func survivable(err error) bool {
	return errors.Is(err, comm.ErrPeerLost) || errors.Is(err, comm.ErrPeerClosed) || errors.Is(err, comm.ErrAborted)
}
