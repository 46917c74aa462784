//go:build gocomm_portable

package kernel

import (
	"testing"

	"github.com/gocomm/comm/core"
)

// TestPortableBuild: under -tags gocomm_portable the vector kernels are
// left out and the Go loops reduce every element, as on every platform
// but linux/amd64.
func TestPortableBuild(t *testing.T) {
	d, s := make([]uint16, 64), make([]uint16, 64)
	if n := reduceF16Vector(core.Sum, d, s); n != 0 {
		t.Errorf("the float16 vector kernel reduced %d elements: half_amd64.go must be left out under gocomm_portable", n)
	}
	if n := reduceBF16Vector(core.Sum, d, s); n != 0 {
		t.Errorf("the bfloat16 vector kernel reduced %d elements", n)
	}
	if n := divideF16Vector(d, 3); n != 0 {
		t.Errorf("the float16 vector divide did %d elements", n)
	}
}
