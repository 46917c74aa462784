//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package rendezvous

import (
	"context"
	"fmt"
	"os"
	"runtime"
)

// fileStoreSupported reports whether this platform has flock(2).
const fileStoreSupported = false

// lockFile reports that the file store needs flock(2), which this platform
// lacks; use a TCP store instead.
func lockFile(ctx context.Context, done <-chan struct{}, f *os.File, exclusive bool) error {
	return fmt.Errorf("the file store needs flock(2), not available on %s; use a TCP store", runtime.GOOS)
}
