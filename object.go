package comm

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"reflect"

	"github.com/gocomm/comm/backend"
)

// Object collectives move Go values, encoded with encoding/gob (which
// decodes data into types, never runs code from the wire). Each costs two
// collectives: the encoded sizes, then the bytes. T must be gob-encodable
// (exported fields; interface values registered with gob.Register).

func encode[T any](v T) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&v); err != nil {
		return nil, fmt.Errorf("%w: encoding %T: %v", ErrInvalid, v, err)
	}
	return b.Bytes(), nil
}

// decode decodes a value that rank from encoded. It first walks the bytes
// without keeping anything (gob's DecodeValue of no value), which proves every
// element count against the bytes present: gob alone allocates a map of as
// many entries as the count on the wire says, so a few corrupt bytes could
// claim gigabytes. Each element takes at least one byte on the wire, so
// what the real decode then allocates is bounded by what was received.
func decode[T any](data []byte, from int) (T, error) {
	var v T
	if err := gob.NewDecoder(bytes.NewReader(data)).DecodeValue(reflect.Value{}); err != nil {
		return v, fmt.Errorf("comm: decoding the object of rank %d (%d bytes) as %T: malformed: %w", from, len(data), v, err)
	}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return v, fmt.Errorf("comm: decoding the object of rank %d as %T: %w", from, v, err)
	}
	return v, nil
}

// BroadcastObject sets *v on every rank to root's *v. If root cannot
// encode *v, every rank returns an *ObjectError saying why.
func BroadcastObject[T any](ctx context.Context, c *Comm, v *T, root int) error {
	if err := c.usable("BroadcastObject"); err != nil {
		return err
	}
	if v == nil {
		// Any rank's nil fails every rank at once, as a collective's bad
		// argument does: the others must not wait for this one.
		return c.failCollective(backend.KindBroadcast, fmt.Errorf("%w: BroadcastObject: v is nil: pass a pointer to the value (on root) or to where it goes", ErrInvalid))
	}
	var data []byte
	size := []int64{0}
	var fail *ObjectError
	if c.rank == root {
		var err error
		if data, err = encode(*v); err != nil {
			// The others still learn of it: a negative size announces a
			// failure report in place of the value.
			fail = &ObjectError{Op: "BroadcastObject", Rank: root, Stage: StageEncode, Reason: err.Error(), Err: err}
			data = failureBytes(fail)
			size[0] = -1 - int64(len(data))
		} else {
			size[0] = int64(len(data))
		}
	}
	if err := Broadcast(ctx, c, size, root); err != nil {
		return err
	}
	if size[0] < 0 {
		if c.rank != root {
			n := -1 - size[0]
			if n > maxReasonLen+16 {
				return fmt.Errorf("%w: BroadcastObject: root %d announced a failure report of %d bytes", ErrLength, root, n)
			}
			data = make([]byte, n)
		}
		if err := Broadcast(ctx, c, data, root); err != nil {
			return err
		}
		if fail != nil {
			return fail
		}
		return parseFailure("BroadcastObject", data)
	}
	if c.rank != root {
		if err := checkSizes("BroadcastObject", size, func(int) int { return root }); err != nil {
			return err
		}
		data = make([]byte, size[0])
	}
	if err := Broadcast(ctx, c, data, root); err != nil {
		return err
	}
	if c.rank != root {
		out, err := decode[T](data, root)
		if err != nil {
			return err
		}
		*v = out
	}
	return nil
}

// AllGatherObject returns every rank's v, in rank order, on every rank.
// If a rank cannot encode its v, every rank returns an *ObjectError naming
// it.
func AllGatherObject[T any](ctx context.Context, c *Comm, v T) ([]T, error) {
	data, sizes, err := encodeAndShareSizes(ctx, c, "AllGatherObject", v, 0)
	if err != nil {
		return nil, err
	}
	counts, total := countsOf(sizes)
	all := make([]byte, total)
	if err := AllGatherV(ctx, c, data, all, counts); err != nil {
		return nil, err
	}
	return decodeAll[T](all, counts)
}

// GatherObject returns every rank's v, in rank order, on root (nil
// elsewhere). If a rank cannot encode its v, every rank returns an
// *ObjectError naming it.
func GatherObject[T any](ctx context.Context, c *Comm, v T, root int) ([]T, error) {
	data, sizes, err := encodeAndShareSizes(ctx, c, "GatherObject", v, root)
	if err != nil {
		return nil, err
	}
	counts, total := countsOf(sizes)
	var all []byte
	if c.rank == root {
		all = make([]byte, total)
	}
	if err := GatherV(ctx, c, data, all, counts, root); err != nil {
		return nil, err
	}
	if c.rank != root {
		return nil, nil
	}
	return decodeAll[T](all, counts)
}

// ScatterObject hands vs[r] of root to rank r; vs is read on root only
// (len(vs) == Size()). If root's vs has the wrong length or a value it
// cannot encode, every rank returns an *ObjectError naming root and why.
func ScatterObject[T any](ctx context.Context, c *Comm, vs []T, root int) (T, error) {
	var zero T
	if err := c.usable("ScatterObject"); err != nil {
		return zero, err
	}
	sizes := make([]int64, c.size)
	var all []byte
	var fail *ObjectError
	if c.rank == root {
		all, fail = encodeScatter(c, vs, sizes)
		if fail != nil {
			// The sizes broadcast still runs so that no rank waits; a
			// negative first size announces root's failure report.
			all = failureBytes(fail)
			sizes[0] = -1 - int64(len(all))
		}
	}
	if err := Broadcast(ctx, c, sizes, root); err != nil {
		return zero, err
	}
	if sizes[0] < 0 {
		return zero, scatterFailure(ctx, c, root, -1-sizes[0], all, fail)
	}
	if err := checkSizes("ScatterObject", sizes, func(int) int { return root }); err != nil {
		return zero, err
	}
	counts, _ := countsOf(sizes)
	mine := make([]byte, counts[c.rank])
	if err := ScatterV(ctx, c, all, mine, counts, root); err != nil {
		return zero, err
	}
	return decode[T](mine, root)
}

// encodeScatter encodes root's values for ScatterObject into one buffer
// (rank order) and their sizes into sizes, or says why it cannot.
func encodeScatter[T any](c *Comm, vs []T, sizes []int64) ([]byte, *ObjectError) {
	if len(vs) != c.size {
		err := fmt.Errorf("%w: ScatterObject: len(vs) = %d, want one value per rank (%d)", ErrInvalid, len(vs), c.size)
		return nil, &ObjectError{Op: "ScatterObject", Rank: c.rank, Stage: StageArgument, Reason: err.Error(), Err: err}
	}
	var all []byte
	for r, v := range vs {
		data, err := encode(v)
		if err != nil {
			err = fmt.Errorf("value for rank %d: %w", r, err)
			return nil, &ObjectError{Op: "ScatterObject", Rank: c.rank, Stage: StageEncode, Reason: err.Error(), Err: err}
		}
		sizes[r] = int64(len(data))
		all = append(all, data...)
	}
	return all, nil
}

// scatterFailure finishes a ScatterObject whose root announced a failure
// report of n bytes (report, on root): root broadcasts it and every rank
// returns it (root its own, fail).
func scatterFailure(ctx context.Context, c *Comm, root int, n int64, report []byte, fail *ObjectError) error {
	if c.rank != root {
		if n > maxReasonLen+16 {
			return fmt.Errorf("%w: ScatterObject: root %d announced a failure report of %d bytes", ErrLength, root, n)
		}
		report = make([]byte, n)
	}
	if err := Broadcast(ctx, c, report, root); err != nil {
		return err
	}
	if fail != nil {
		return fail
	}
	return parseFailure("ScatterObject", report)
}

// encodeAndShareSizes encodes v and all-gathers the sizes of every rank's
// encoding, or the failure of a rank that could not encode or passed a
// root out of range (see exchangeSizes), so that it fails every rank at
// once. root is GatherObject's (0 for AllGatherObject); the ranks check
// that they agree on it.
func encodeAndShareSizes[T any](ctx context.Context, c *Comm, op string, v T, root int) ([]byte, []int64, error) {
	if err := c.usable(op); err != nil {
		return nil, nil, err
	}
	var data []byte
	var local *ObjectError
	err := c.checkRoot(backend.KindGather, root)
	if err != nil {
		local = &ObjectError{Op: op, Rank: c.rank, Stage: StageArgument, Reason: err.Error(), Err: err}
	} else if data, err = encode(v); err != nil {
		local = &ObjectError{Op: op, Rank: c.rank, Stage: StageEncode, Reason: err.Error(), Err: err}
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
