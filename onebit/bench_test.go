package onebit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/onebit"
)

// BenchmarkAllReduce times onebit.AllReduce against comm.AllReduce (Avg)
// of the same float32 buffers on an in-process world of 2 ranks; MB/s are
// of float32 input per rank. In-process channels move bytes at memory
// speed, so this measures the computation, which a slow link hides.
func BenchmarkAllReduce(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		for _, kind := range []string{"onebit", "plain"} {
			b.Run(fmt.Sprintf("%s/%dMiB", kind, size>>20), func(b *testing.B) {
				const n = 2
				world := localWorld(b, n)
				bufs := make([][]float32, n)
				states := make([]*onebit.State, n)
				for r := range n {
					bufs[r] = make([]float32, size/4)
					for i := range bufs[r] {
						bufs[r][i] = float32(i%1000) - 500
					}
					states[r] = onebit.NewState(size/4, n)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				errs := onEveryRank(world, func(c *comm.Comm, r int) error {
					for range b.N {
						var err error
						if kind == "onebit" {
							err = onebit.AllReduce(context.Background(), c, bufs[r], states[r])
						} else {
							err = comm.AllReduce(context.Background(), c, bufs[r], bufs[r], comm.Avg)
						}
						if err != nil {
							return err
						}
					}
					return nil
				})
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
