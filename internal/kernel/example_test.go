package kernel_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
)

// Averaging float32 gradients from two ranks: reduce with Avg (which sums),
// then divide by the number of contributions.
func ExampleReduce() {
	local := kernel.Alloc(3 * 4)
	peer := kernel.Alloc(3 * 4)
	for i, v := range []float32{1, 2, 3} {
		binary.LittleEndian.PutUint32(local[4*i:], math.Float32bits(v))
		binary.LittleEndian.PutUint32(peer[4*i:], math.Float32bits(10*v))
	}
	if err := kernel.Reduce(core.Float32, core.Avg, local, peer); err != nil {
		fmt.Println(err)
		return
	}
	if err := kernel.Divide(core.Float32, local, 2); err != nil {
		fmt.Println(err)
		return
	}
	avg := make([]float32, 3)
	for i := range avg {
		avg[i] = math.Float32frombits(binary.LittleEndian.Uint32(local[4*i:]))
	}
	fmt.Println(avg)
	fmt.Println(kernel.Reduce(core.Float32, core.BXor, local, peer))
	// Output:
	// [5.5 11 16.5]
	// comm: kernel: unsupported dtype or op: Reduce: BXor needs an integer dtype, got float32
}

func ExampleF32ToF16() {
	h := kernel.F32ToF16(1.0 / 3)
	fmt.Printf("%#04x %v\n", h, kernel.F16ToF32(h))
	fmt.Printf("%#04x\n", kernel.F32ToF16(70000)) // overflows to +Inf
	// Output:
	// 0x3555 0.33325195
	// 0x7c00
}
