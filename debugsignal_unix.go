//go:build unix

package comm

import (
	"os"
	"syscall"
)

// dumpSignals are the signals that dump the flight recorders.
var dumpSignals = []os.Signal{syscall.SIGUSR1}
