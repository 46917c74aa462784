package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gocomm/comm"
)

// RunLocal runs every case on a world whose ranks all live in this process
// (one goroutine per rank), case after case, and returns the failures of
// the first case that failed (nil if all passed). Once a case fails the
// world may be aborted, so it stops there.
func RunLocal(ctx context.Context, world []*comm.Comm, cases []Case, perCase time.Duration) error {
	for _, cs := range cases {
		if err := RunCase(ctx, world, cs, perCase); err != nil {
			return err
		}
	}
	return nil
}

// RunCase runs one case on every rank of world concurrently. Members of a
// group that this rank is not part of are skipped (pass nil).
func RunCase(ctx context.Context, world []*comm.Comm, cs Case, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(world))
	var wg sync.WaitGroup
	for i, c := range world {
		if c == nil || !c.IsMember() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cs.Run(ctx, c)
		}()
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("rank %d of %d: %w", world[i].Rank(), world[i].Size(), err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("case %s: %w", cs.Name, errors.Join(failed...))
	}
	return nil
}
