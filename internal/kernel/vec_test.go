package kernel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocomm/comm/core"
)

// TestVectorMatchesGoLoops: where a vector kernel reduces a prefix
// (reduceVector), the result is bit for bit what the Go loops give for
// the whole buffer, NaN payloads included, at lengths around the
// kernels' 128-byte blocks and with every edge value paired with every
// other (randomBuffers' first elements).
func TestVectorMatchesGoLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !op.ValidFor(dt) {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				for _, n := range []int{0, 127, 128, 129, 255, 256, 1000, 4096 + 40} {
					if n%dt.Size() != 0 {
						n -= n % dt.Size()
					}
					a, b := randomBuffers(rng, dt, n/dt.Size())
					vec, loops := placed(a, 0), placed(a, 0)
					reduceNative(dt, op, vec, b)
					reduceLoops(dt, op, loops, b)
					if !bytes.Equal(vec, loops) {
						for i := 0; i < n; i += dt.Size() {
							if !bytes.Equal(vec[i:i+dt.Size()], loops[i:i+dt.Size()]) {
								t.Fatalf("%d bytes: element %d: vector % x, Go loops % x (inputs % x, % x)", n, i/dt.Size(),
									vec[i:i+dt.Size()], loops[i:i+dt.Size()], a[i:i+dt.Size()], b[i:i+dt.Size()])
							}
						}
					}
				}
			})
		}
	}
}

// reduceLoops is reduceNative without the vector kernels.
func reduceLoops(dt core.DType, op core.Op, dst, src []byte) {
	switch dt {
	case core.Int32:
		reduceInteger(op, view[int32](dst), view[int32](src))
	case core.Int64:
		reduceInteger(op, view[int64](dst), view[int64](src))
	case core.Uint32:
		reduceInteger(op, view[uint32](dst), view[uint32](src))
	case core.Uint64:
		reduceInteger(op, view[uint64](dst), view[uint64](src))
	case core.Float32:
		reduceFloat(op, view[float32](dst), view[float32](src))
	case core.Float64:
		reduceFloat(op, view[float64](dst), view[float64](src))
	default:
		reduceNative(dt, op, dst, src)
	}
}
