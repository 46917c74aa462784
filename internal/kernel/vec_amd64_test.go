//go:build linux && !gocomm_portable

package kernel

import (
	"testing"

	"github.com/gocomm/comm/core"
)

// TestVectorKernelsRun: on a CPU with AVX2 the 32- and 64-bit sums and
// products go through the vector kernels (so TestVectorMatchesGoLoops
// compares them with something).
func TestVectorKernelsRun(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: the Go loops reduce everything")
	}
	buf := make([]byte, 1000)
	for _, c := range []struct {
		dt core.DType
		op core.Op
	}{{core.Float32, core.Sum}, {core.Float64, core.Avg}, {core.Int32, core.Prod}, {core.Uint64, core.Sum}, {core.Float64, core.Prod}} {
		if got := reduceVector(c.dt, c.op, buf, buf); got != 896 {
			t.Errorf("%v %v: the vector kernel reduced %d of 1000 bytes, want 896", c.dt, c.op, got)
		}
	}
	if got := reduceVector(core.Float32, core.Max, buf, buf); got != 0 {
		t.Errorf("float32 Max: the vector kernel reduced %d bytes; Max stays in Go", got)
	}
}
