package object

import (
	"context"
	"fmt"

	"github.com/gocomm/comm"
)

// Work is the handle of an object collective started asynchronously.
// Wait returns its result.
type Work[T any] struct {
	w *comm.Work
	v T
}

// Wait blocks until the operation is complete and returns its result and
// error. A nil or zero Work, which no Start function made, returns at once
// with an error wrapping comm.ErrInvalid.
func (w *Work[T]) Wait() (T, error) {
	if w == nil || w.w == nil {
		var zero T
		return zero, fmt.Errorf("%w: a nil *object.Work or a zero one: wait on what a Start function returned", comm.ErrInvalid)
	}
	err := w.w.Wait()
	return w.v, err
}

// Done is closed when the operation is complete (at once for a nil or a
// zero Work).
func (w *Work[T]) Done() <-chan struct{} { return w.Work().Done() }

// Work returns the plain handle, to wait on it beside other operations
// (comm.WaitAll, comm.WaitAny); nil for a nil or a zero Work (a nil
// *comm.Work's Wait fails at once).
func (w *Work[T]) Work() *comm.Work {
	if w == nil {
		return nil
	}
	return w.w
}

// start runs f as comm.StartFunc does and keeps its result for Wait.
func start[T any](f func() (T, error)) *Work[T] {
	ow := &Work[T]{}
	ow.w = comm.StartFunc(func() (err error) {
		ow.v, err = f()
		return err
	})
	return ow
}

// StartBroadcast is Broadcast, asynchronous; Wait returns the broadcast
// value (root's *v) on every rank. *v is read (on root) and written
// (elsewhere) by the operation until its Work is done.
func StartBroadcast[T any](ctx context.Context, c *comm.Comm, v *T, root int) *Work[T] {
	return start(func() (T, error) {
		if err := Broadcast(ctx, c, v, root); err != nil {
			var zero T
			return zero, err
		}
		return *v, nil
	})
}

// StartAllGather is AllGather, asynchronous; Wait returns every rank's
// value in rank order.
func StartAllGather[T any](ctx context.Context, c *comm.Comm, v T) *Work[[]T] {
	return start(func() ([]T, error) { return AllGather(ctx, c, v) })
}

// StartGather is Gather, asynchronous; Wait returns every rank's value in
// rank order on root and nil elsewhere.
func StartGather[T any](ctx context.Context, c *comm.Comm, v T, root int) *Work[[]T] {
	return start(func() ([]T, error) { return Gather(ctx, c, v, root) })
}

// StartScatter is Scatter, asynchronous; Wait returns this rank's value.
// vs is read on root until the Work is done.
func StartScatter[T any](ctx context.Context, c *comm.Comm, vs []T, root int) *Work[T] {
	return start(func() (T, error) { return Scatter(ctx, c, vs, root) })
}

// StartReduce is Reduce, asynchronous; Wait returns the result on root and
// the zero T elsewhere.
func StartReduce[T any](ctx context.Context, c *comm.Comm, v T, f func(a, b T) T, root int, opts ...ReduceOption) *Work[T] {
	return start(func() (T, error) { return reduce(ctx, c, v, f, root, false, opts) })
}

// StartAllReduce is AllReduce, asynchronous; Wait returns the result.
func StartAllReduce[T any](ctx context.Context, c *comm.Comm, v T, f func(a, b T) T, opts ...ReduceOption) *Work[T] {
	return start(func() (T, error) { return reduce(ctx, c, v, f, 0, true, opts) })
}
