//go:build gocomm_portable

package onebitkernel

import "testing"

// TestPortableBuild: under -tags gocomm_portable the AVX2 kernels are left
// out and the Go loops do every element, as on every platform but
// linux/amd64.
func TestPortableBuild(t *testing.T) {
	if useAVX2 {
		t.Error("the AVX2 kernels are selected: dispatch_amd64.go must be left out under gocomm_portable")
	}
}
