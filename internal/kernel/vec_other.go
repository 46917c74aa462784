//go:build !amd64 || !linux || gocomm_portable

package kernel

import "github.com/gocomm/comm/core"

// Without vector kernels the Go loops reduce every element (see
// half_other.go for when).
func reduceVector(core.DType, core.Op, []byte, []byte) int { return 0 }

func copyNT(dst, src []byte) (lo, hi int) { return 0, 0 }

func reduceToNT(core.DType, core.Op, []byte, []byte, []byte, []byte) int { return 0 }
