//go:build linux

package transport

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSharedAllocNoRoom: an allocation larger than the room left in the
// segment's file system (a container's small /dev/shm) fails on every
// rank with an error that says so, instead of a SIGBUS when a page is
// first touched; the world goes on, and a smaller one succeeds.
func TestSharedAllocNoRoom(t *testing.T) {
	requireSHM(t)
	dir := t.TempDir()
	l := shmLayout{n: 2, ringBytes: minRingBytes}
	room := l.size() + 1<<20
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", room)); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	ws := shmWorldWith(t, 2, SHMOptions{Dir: dir})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, w := range ws {
		wg.Go(func() {
			b := w.Board()
			var seq uint64
			if _, err := b.MapShared(1, 4<<20, sharedAgree(t, b, &seq)); err == nil {
				errs[r] = fmt.Errorf("4 MiB in a %d-byte tmpfs: no error", room)
				return
			} else if r == 0 && !strings.Contains(err.Error(), "no room") {
				errs[r] = fmt.Errorf("4 MiB in a %d-byte tmpfs: %v, want no room", room, err)
				return
			}
			mem, err := b.MapShared(2, 64<<10, sharedAgree(t, b, &seq))
			if err != nil {
				errs[r] = fmt.Errorf("64 KiB after the failure: %v", err)
				return
			}
			mem[len(mem)-1] = 1
			errs[r] = b.UnmapShared(mem)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
