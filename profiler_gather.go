package comm

import (
	"context"
	"fmt"

	"github.com/gocomm/comm/internal/gobwire"
)

// gatherGob moves one gob-encoded value per rank of c, in rank order: to
// every rank (all) or to root, the other ranks getting nil. The straggler
// analysis gathers its arrivals and hosts with it; it is the object
// collectives' exchange (package object) cut to what these values need:
// a rank that cannot encode announces a negative size, so every rank
// fails at once, and announced sizes are bounded before anything is
// allocated for them.
func gatherGob[T any](ctx context.Context, c *Comm, v T, root int, all bool) ([]T, error) {
	data, encErr := gobwire.Encode(v)
	size := int64(len(data))
	if encErr != nil {
		size = -1
	}
	sizes := make([]int64, c.size)
	if err := AllGather(ctx, c, []int64{size}, sizes); err != nil {
		return nil, err
	}
	counts := make([]int, c.size)
	var total int64
	for r, n := range sizes {
		switch {
		case n < 0 && r == c.rank:
			return nil, fmt.Errorf("%w: encoding %T: %v", ErrInvalid, v, encErr)
		case n < 0:
			return nil, fmt.Errorf("%w: rank %d could not encode its %T", ErrInvalid, r, v)
		case n > gobwire.MaxBytes || total+n > int64(maxInt):
			return nil, fmt.Errorf("%w: rank %d announced an encoding of %d bytes", ErrLength, r, n)
		}
		counts[r] = int(n)
		total += n
	}
	var buf []byte
	if all || c.rank == root {
		buf = make([]byte, total)
	}
	var err error
	if all {
		err = AllGatherV(ctx, c, data, buf, counts)
	} else {
		err = GatherV(ctx, c, data, buf, counts, root)
	}
	if err != nil || buf == nil {
		return nil, err
	}
	out := make([]T, c.size)
	off := 0
	for r, n := range counts {
		if out[r], err = gobwire.Decode[T](buf[off:off+n], r); err != nil {
			return nil, err
		}
		off += n
	}
	return out, nil
}

const maxInt = int(^uint(0) >> 1)
