//go:build unix

package comm_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system: a
// benchmark's figure that other processes on a busy host disturb less than
// wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
