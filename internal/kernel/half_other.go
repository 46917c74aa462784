//go:build !amd64 || !linux || gocomm_portable

package kernel

import "github.com/gocomm/comm/core"

// Without vector kernels the Go loops do everything: on every architecture
// but amd64, outside Linux (the kernels are tested on Linux only), and in
// a gocomm_portable build.

func reduceF16Vector(core.Op, []uint16, []uint16) int { return 0 }

func divideF16Vector([]uint16, float32) int { return 0 }

func reduceBF16Vector(core.Op, []uint16, []uint16) int { return 0 }
