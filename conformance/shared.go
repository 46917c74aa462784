package conformance

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gocomm/comm"
)

// sharedCases: all-reduces of buffers from comm.AllocShared (in place and
// not, below and above the board's limit, a stripe per rank that is not
// whole lines), then with one rank's recv ordinary memory, which every
// rank must notice. Wherever the backend cannot share memory the buffers
// are ordinary and the results the same.
func sharedCases() []Case {
	return []Case{
		sharedCase[float32](comm.Sum), sharedCase[float64](comm.Avg),
		sharedCase[int32](comm.Max), sharedCase[comm.BFloat16](comm.Sum), sharedCase[uint8](comm.BXor),
	}
}

func sharedCase[T comm.Numeric](op comm.ReduceOp) Case {
	return Case{fmt.Sprintf("AllocShared/AllReduce/%s/%v", infoOf[T]().name, op), func(ctx context.Context, c *comm.Comm) error {
		var z T
		size := int(unsafe.Sizeof(z))
		counts := []int{0, 7, 8<<10/size + 1, 64<<10 + 3}
		most := counts[len(counts)-1]
		send, err := comm.AllocShared[T](ctx, c, most)
		if err != nil {
			return err
		}
		defer comm.FreeShared(c, send)
		recv, err := comm.AllocShared[T](ctx, c, most+64)
		if err != nil {
			return err
		}
		defer comm.FreeShared(c, recv)
		for _, n := range counts {
			for _, how := range []string{"in place", "out of place", "one ordinary recv"} {
				in := inputs[T](op, c.Rank(), n)
				s, r := send[:n], send[:n]
				switch {
				case how == "out of place":
					// Each rank's recv at its own offset.
					off := c.Rank() % 64
					r = recv[off : off+n]
				case how == "one ordinary recv" && c.Rank() == c.Size()-1:
					r = make([]T, n)
				case how == "one ordinary recv":
					r = recv[:n]
				}
				copy(s, in)
				if err := comm.AllReduce(ctx, c, s, r, op); err != nil {
					return fmt.Errorf("%d elements, %s: %w", n, how, err)
				}
				if err := check(fmt.Sprintf("%d elements, %s", n, how), r, reduceRefs[T](op, c.Size(), 0, n)); err != nil {
					return err
				}
				if how != "in place" {
					if err := check(fmt.Sprintf("%d elements, %s: send untouched", n, how), s, in); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}}
}
