//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package rendezvous

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// fileStoreSupported reports whether this platform has flock(2).
const fileStoreSupported = true

// lockFile takes a flock(2) on f, exclusive or shared, polling with LOCK_NB
// so that ctx and done (the store's Close) interrupt the wait. The lock is
// released when f is closed.
func lockFile(ctx context.Context, done <-chan struct{}, f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	backoff := 100 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return waitError(ctx, "store file locked by another process")
		case <-done:
			t.Stop()
			return ErrStoreClosed
		}
		backoff = min(2*backoff, filePollInterval)
	}
}
