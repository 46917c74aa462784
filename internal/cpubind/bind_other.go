//go:build !linux

package cpubind

import (
	"fmt"
	"runtime"
)

// HostCPUs returns runtime.NumCPU(): this platform's cpusets are not read.
func HostCPUs() int { return runtime.NumCPU() }

// OneLastLevelCache reports false here: the caches are not described.
func OneLastLevelCache() bool { return false }

// Allowed returns nil: this platform does not say (auto binds nothing).
func Allowed() ([]int, error) { return nil, nil }

// Apply fails: binding is supported on Linux only.
func Apply(cpus []int) error {
	return fmt.Errorf("%w: binding to CPUs %s is supported on Linux only; unset GOCOMM_BIND", ErrBind, Format(cpus))
}

// ThreadCPUs returns nothing outside Linux.
func ThreadCPUs() (map[int][]int, error) { return nil, nil }

// ApplyThread fails: binding is supported on Linux only.
func ApplyThread(cpus []int) error { return Apply(cpus) }
