//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package comm

import "syscall"

// wakeMonitor makes a system call through the runtime (entersyscall), which
// wakes the system monitor if it sleeps.
func wakeMonitor() { syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0) }
