package object

import (
	"context"
	"fmt"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/commhook"
	"github.com/gocomm/comm/internal/gobwire"
)

// hooks are the root package's internals this package needs (see the
// package doc); the root package set them before this package's init.
var hooks = commhook.Get[*comm.Comm]()

func encode[T any](v T) ([]byte, error) {
	data, err := gobwire.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %T: %v", comm.ErrInvalid, v, err)
	}
	return data, nil
}

// decode decodes a value that rank from encoded, its allocation bounded by
// len(data) (gobwire.Decode).
func decode[T any](data []byte, from int) (T, error) {
	return gobwire.Decode[T](data, from)
}

// Broadcast sets *v on every rank to root's *v. If root cannot encode *v,
// every rank returns an *Error saying why.
func Broadcast[T any](ctx context.Context, c *comm.Comm, v *T, root int) (err error) {
	const op = "object.Broadcast"
	if err := hooks.Usable(c, op); err != nil {
		return err
	}
	ctx, end := hooks.Begin(ctx, c, op, root)
	size := []int64{0}
	defer func() { end(max(size[0], 0), err) }()
	if v == nil {
		// Any rank's nil fails every rank at once, as a collective's bad
		// argument does: the others must not wait for this one.
		return hooks.FailBroadcast(c, fmt.Errorf("%w: %s: v is nil: pass a pointer to the value (on root) or to where it goes", comm.ErrInvalid, op))
	}
	rank := c.Rank()
	var data []byte
	var fail *Error
	if rank == root {
		var err error
		if data, err = encode(*v); err != nil {
			// The others still learn of it: a negative size announces a
			// failure report in place of the value.
			fail = &Error{Op: op, Rank: root, Stage: StageEncode, Reason: err.Error(), Err: err}
			data = failureBytes(fail)
			size[0] = -1 - int64(len(data))
		} else {
			size[0] = int64(len(data))
		}
	}
	if err := comm.Broadcast(ctx, c, size, root); err != nil {
		return err
	}
	if size[0] < 0 {
		if rank != root {
			n := -1 - size[0]
			if n > maxReasonLen+16 {
				return fmt.Errorf("%w: %s: root %d announced a failure report of %d bytes", comm.ErrLength, op, root, n)
			}
			data = make([]byte, n)
		}
		if err := comm.Broadcast(ctx, c, data, root); err != nil {
			return err
		}
		if fail != nil {
			return fail
		}
		return parseFailure(op, data)
	}
	if rank != root {
		if err := checkSizes(op, size, func(int) int { return root }); err != nil {
			return err
		}
		data = make([]byte, size[0])
	}
	if err := comm.Broadcast(ctx, c, data, root); err != nil {
		return err
	}
	if rank != root {
		out, err := decode[T](data, root)
		if err != nil {
			return err
		}
		*v = out
	}
	return nil
}

// AllGather returns every rank's v, in rank order, on every rank. If a
// rank cannot encode its v, every rank returns an *Error naming it.
func AllGather[T any](ctx context.Context, c *comm.Comm, v T) (_ []T, err error) {
	const op = "object.AllGather"
	if err := hooks.Usable(c, op); err != nil {
		return nil, err
	}
	ctx, end := hooks.Begin(ctx, c, op, -1)
	var data []byte
	defer func() { end(int64(len(data)), err) }()
	data, sizes, err := encodeAndShareSizes(ctx, c, op, v, 0)
	if err != nil {
		return nil, err
	}
	counts, total := countsOf(sizes)
	all := make([]byte, total)
	if err := comm.AllGatherV(ctx, c, data, all, counts); err != nil {
		return nil, err
	}
	return decodeAll[T](all, counts)
}

// Gather returns every rank's v, in rank order, on root (nil elsewhere).
// If a rank cannot encode its v, every rank returns an *Error naming it.
func Gather[T any](ctx context.Context, c *comm.Comm, v T, root int) (_ []T, err error) {
	const op = "object.Gather"
	if err := hooks.Usable(c, op); err != nil {
		return nil, err
	}
	ctx, end := hooks.Begin(ctx, c, op, root)
	var data []byte
	defer func() { end(int64(len(data)), err) }()
	data, sizes, err := encodeAndShareSizes(ctx, c, op, v, root)
	if err != nil {
		return nil, err
	}
	counts, total := countsOf(sizes)
	var all []byte
	if c.Rank() == root {
		all = make([]byte, total)
	}
	if err := comm.GatherV(ctx, c, data, all, counts, root); err != nil {
		return nil, err
	}
	if c.Rank() != root {
		return nil, nil
	}
	return decodeAll[T](all, counts)
}

// Scatter hands vs[r] of root to rank r; vs is read on root only
// (len(vs) == Size()). If root's vs has the wrong length or a value it
// cannot encode, every rank returns an *Error naming root and why.
func Scatter[T any](ctx context.Context, c *comm.Comm, vs []T, root int) (_ T, err error) {
	const op = "object.Scatter"
	var zero T
	if err := hooks.Usable(c, op); err != nil {
		return zero, err
	}
	ctx, end := hooks.Begin(ctx, c, op, root)
	var mine []byte
	defer func() { end(int64(len(mine)), err) }()
	sizes := make([]int64, c.Size())
	var all []byte
	var fail *Error
	if c.Rank() == root {
		all, fail = encodeScatter(c, vs, sizes)
		if fail != nil {
			// The sizes broadcast still runs so that no rank waits; a
			// negative first size announces root's failure report.
			all = failureBytes(fail)
			sizes[0] = -1 - int64(len(all))
		}
	}
	if err := comm.Broadcast(ctx, c, sizes, root); err != nil {
		return zero, err
	}
	if sizes[0] < 0 {
		return zero, scatterFailure(ctx, c, root, -1-sizes[0], all, fail)
	}
	if err := checkSizes(op, sizes, func(int) int { return root }); err != nil {
		return zero, err
	}
	counts, _ := countsOf(sizes)
	mine = make([]byte, counts[c.Rank()])
	if err := comm.ScatterV(ctx, c, all, mine, counts, root); err != nil {
		return zero, err
	}
	return decode[T](mine, root)
}

// encodeScatter encodes root's values for Scatter into one buffer (rank
// order) and their sizes into sizes, or says why it cannot.
func encodeScatter[T any](c *comm.Comm, vs []T, sizes []int64) ([]byte, *Error) {
	const op = "object.Scatter"
	if len(vs) != c.Size() {
		err := fmt.Errorf("%w: %s: len(vs) = %d, want one value per rank (%d)", comm.ErrInvalid, op, len(vs), c.Size())
		return nil, &Error{Op: op, Rank: c.Rank(), Stage: StageArgument, Reason: err.Error(), Err: err}
	}
	var all []byte
	for r, v := range vs {
		data, err := encode(v)
		if err != nil {
			err = fmt.Errorf("value for rank %d: %w", r, err)
			return nil, &Error{Op: op, Rank: c.Rank(), Stage: StageEncode, Reason: err.Error(), Err: err}
		}
		sizes[r] = int64(len(data))
		all = append(all, data...)
	}
	return all, nil
}

// scatterFailure finishes a Scatter whose root announced a failure report
// of n bytes (report, on root): root broadcasts it and every rank returns
// it (root its own, fail).
func scatterFailure(ctx context.Context, c *comm.Comm, root int, n int64, report []byte, fail *Error) error {
	const op = "object.Scatter"
	if c.Rank() != root {
		if n > maxReasonLen+16 {
			return fmt.Errorf("%w: %s: root %d announced a failure report of %d bytes", comm.ErrLength, op, root, n)
		}
		report = make([]byte, n)
	}
	if err := comm.Broadcast(ctx, c, report, root); err != nil {
		return err
	}
	if fail != nil {
		return fail
	}
	return parseFailure(op, report)
}

// encodeAndShareSizes encodes v and all-gathers the sizes of every rank's
// encoding, or the failure of a rank that could not encode or passed a
// root out of range (see exchangeSizes), so that it fails every rank at
// once. root is Gather's (0 for AllGather); the ranks check that they
// agree on it.
func encodeAndShareSizes[T any](ctx context.Context, c *comm.Comm, op string, v T, root int) ([]byte, []int64, error) {
	if err := hooks.Usable(c, op); err != nil {
		return nil, nil, err
	}
	var data []byte
	var local *Error
	var err error
	if root < 0 || root >= c.Size() {
		err = fmt.Errorf("%w: %s: root %d out of range [0,%d)", comm.ErrInvalid, op, root, c.Size())
		local = &Error{Op: op, Rank: c.Rank(), Stage: StageArgument, Reason: err.Error(), Err: err}
	} else if data, err = encode(v); err != nil {
		local = &Error{Op: op, Rank: c.Rank(), Stage: StageEncode, Reason: err.Error(), Err: err}
	}
	sizes, err := exchangeSizes(ctx, c, op, int64(len(data)), int64(root)<<1, local, err)
	return data, sizes, err
}

func countsOf(sizes []int64) ([]int, int) {
	counts := make([]int, len(sizes))
	total := 0
	for i, s := range sizes {
		counts[i] = int(s)
		total += int(s)
	}
	return counts, total
}

func decodeAll[T any](all []byte, counts []int) ([]T, error) {
	out := make([]T, len(counts))
	off := 0
	for r, n := range counts {
		v, err := decode[T](all[off:off+n], r)
		if err != nil {
			return nil, err
		}
		out[r] = v
		off += n
	}
	return out, nil
}
