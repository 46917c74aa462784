//go:build !unix

package comm

import "os"

// dumpSignals is empty: this system has no SIGUSR1.
var dumpSignals []os.Signal
