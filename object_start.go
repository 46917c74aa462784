package comm

import "context"

// The Start forms of the object collectives. Each object collective is
// several collectives in a row whose sizes depend on the data (the encoded
// sizes first, then the bytes), so its Start form runs the blocking form
// on a goroutine of its own, as StartFunc does: the collectives are issued
// from that goroutine after the Start call returns. Do not start other
// operations on c until the Work is done, or the ranks could match them in
// a different order. The values passed belong to the operation until then.

// StartBroadcastObject is BroadcastObject, asynchronous: *v is read (on
// root) and written (elsewhere) by the operation until its Work is done.
func StartBroadcastObject[T any](ctx context.Context, c *Comm, v *T, root int) *Work {
	return StartFunc(func() error { return BroadcastObject(ctx, c, v, root) })
}

// StartAllGatherObject is AllGatherObject, asynchronous; Wait returns every
// rank's value in rank order.
func StartAllGatherObject[T any](ctx context.Context, c *Comm, v T) *ObjectWork[[]T] {
	return startObject(func() ([]T, error) { return AllGatherObject(ctx, c, v) })
}

// StartGatherObject is GatherObject, asynchronous; Wait returns every
// rank's value in rank order on root and nil elsewhere.
func StartGatherObject[T any](ctx context.Context, c *Comm, v T, root int) *ObjectWork[[]T] {
	return startObject(func() ([]T, error) { return GatherObject(ctx, c, v, root) })
}

// StartScatterObject is ScatterObject, asynchronous; Wait returns this
// rank's value. vs is read on root until the Work is done.
func StartScatterObject[T any](ctx context.Context, c *Comm, vs []T, root int) *ObjectWork[T] {
	return startObject(func() (T, error) { return ScatterObject(ctx, c, vs, root) })
}

// startObject runs f as StartFunc does and keeps its result for Wait.
func startObject[T any](f func() (T, error)) *ObjectWork[T] {
	ow := &ObjectWork[T]{}
	ow.w = StartFunc(func() (err error) {
		ow.v, err = f()
		return err
	})
	return ow
}
