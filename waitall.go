package comm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

// WaitAll waits until every Work of works is done (MPI_Waitall) and
// returns their errors joined, each prefixed with its index in works; nil
// when all succeeded. Nil entries are skipped (there is nothing to wait
// for), as MPI skips MPI_REQUEST_NULL. Works already done count at once;
// a zero Work, which no Start function made, counts as failed with
// ErrInvalid, and so does a nil ctx.
//
// If ctx ends first, WaitAll returns an error wrapping ctx.Err() that says
// how many works are still running, joined with the errors of the works
// it had already found failed. It does not cancel them: their
// buffers still belong to them until each is done (wait again, or abort
// the communicator). WaitAll may be called from several goroutines on the
// same works.
func WaitAll(ctx context.Context, works ...*Work) error {
	if ctx == nil {
		return errNilContext("WaitAll")
	}
	errs := make([]error, 0, len(works))
	for i, w := range works {
		if w == nil {
			continue
		}
		select {
		case <-w.Done():
		default:
			// Done works win over an ended ctx, so a check of works
			// already done succeeds whatever ctx says.
			select {
			case <-w.Done():
			case <-ctx.Done():
				// The errors of works already seen failing are kept.
				return errors.Join(append(errs, fmt.Errorf("comm: WaitAll: %d of %d works not done: %w", pending(works[i:]), len(works), ctx.Err()))...)
			}
		}
		if err := w.Err(); err != nil {
			errs = append(errs, fmt.Errorf("comm: WaitAll: work %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// WaitAny waits until one Work of works is done (MPI_Waitany) and returns
// its index and its error. If several are already done it returns the
// lowest index among them, so a loop that waits for and then drops the
// returned work sees every work once. Nil entries are skipped; if works
// holds no Work at all, WaitAny returns -1 and an error wrapping
// ErrInvalid rather than wait for nothing (a nil ctx is ErrInvalid too).
//
// If ctx ends before any work is done, WaitAny returns -1 and an error
// wrapping ctx.Err(); the works go on (see WaitAll).
func WaitAny(ctx context.Context, works ...*Work) (int, error) {
	if ctx == nil {
		return -1, errNilContext("WaitAny")
	}
	cases := make([]reflect.SelectCase, 0, len(works)+1)
	index := make([]int, 0, len(works))
	for i, w := range works {
		if w == nil {
			continue
		}
		select {
		case <-w.Done():
			return i, w.Err()
		default:
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.Done())})
		index = append(index, i)
	}
	if len(index) == 0 {
		return -1, fmt.Errorf("%w: WaitAny: no Work to wait for (%d nil entries)", ErrInvalid, len(works))
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	chosen, _, _ := reflect.Select(cases)
	if chosen == len(index) {
		return -1, fmt.Errorf("comm: WaitAny: none of %d works done: %w", len(index), ctx.Err())
	}
	i := index[chosen]
	return i, works[i].Err()
}

// pending counts the works not yet done.
func pending(works []*Work) int {
	n := 0
	for _, w := range works {
		if w == nil {
			continue
		}
		select {
		case <-w.Done():
		default:
			n++
		}
	}
	return n
}
