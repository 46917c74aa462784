//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package comm

func wakeMonitor() {}
