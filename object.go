package comm

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
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

func decode[T any](data []byte, from int) (T, error) {
	var v T
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return v, fmt.Errorf("comm: decoding the object of rank %d as %T: %w", from, v, err)
	}
	return v, nil
}

// BroadcastObject sets *v on every rank to root's *v.
func BroadcastObject[T any](ctx context.Context, c *Comm, v *T, root int) error {
	var data []byte
	size := []int64{0}
	if c.rank == root {
		var err error
		if data, err = encode(*v); err != nil {
			return err
		}
		size[0] = int64(len(data))
	}
	if err := Broadcast(ctx, c, size, root); err != nil {
		return err
	}
	if c.rank != root {
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
func AllGatherObject[T any](ctx context.Context, c *Comm, v T) ([]T, error) {
	data, err := encode(v)
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, c.size)
	if err := AllGather(ctx, c, []int64{int64(len(data))}, sizes); err != nil {
		return nil, err
	}
	counts, total := countsOf(sizes)
	all := make([]byte, total)
	if err := AllGatherV(ctx, c, data, all, counts); err != nil {
		return nil, err
	}
	return decodeAll[T](all, counts)
}

// GatherObject returns every rank's v, in rank order, on root (nil elsewhere).
func GatherObject[T any](ctx context.Context, c *Comm, v T, root int) ([]T, error) {
	data, err := encode(v)
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, c.size)
	if err := AllGather(ctx, c, []int64{int64(len(data))}, sizes); err != nil {
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
// (len(vs) == Size()).
func ScatterObject[T any](ctx context.Context, c *Comm, vs []T, root int) (T, error) {
	var zero T
	sizes := make([]int64, c.size)
	var all []byte
	if c.rank == root {
		if len(vs) != c.size {
			// The sizes broadcast still runs so that no rank hangs; a
			// negative size tells the others what happened.
			sizes[0] = -1
		} else {
			for r, v := range vs {
				data, err := encode(v)
				if err != nil {
					sizes[0] = -1
					break
				}
				sizes[r] = int64(len(data))
				all = append(all, data...)
			}
		}
	}
	if err := Broadcast(ctx, c, sizes, root); err != nil {
		return zero, err
	}
	if sizes[0] < 0 {
		return zero, fmt.Errorf("%w: ScatterObject: root %d had len(vs) = %d for %d ranks, or a value it could not encode", ErrInvalid, root, len(vs), c.size)
	}
	counts, _ := countsOf(sizes)
	mine := make([]byte, counts[c.rank])
	if err := ScatterV(ctx, c, all, mine, counts, root); err != nil {
		return zero, err
	}
	return decode[T](mine, root)
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
