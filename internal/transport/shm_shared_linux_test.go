//go:build linux

package transport

import (
	"fmt"
	"os"
	"strings"
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
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs to fill needs root (CI runs as root)")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", room)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs on %s: %v", room, dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	ws := shmWorldWith(t, 2, SHMOptions{Dir: dir})
	_, errs := mapEveryRank(t, ws, 1, 4<<20)
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: 4 MiB in a %d-byte tmpfs: no error", r, room)
		}
		if r == 0 && !strings.Contains(err.Error(), "no room") {
			t.Errorf("rank 0: 4 MiB in a %d-byte tmpfs: %v, want no room", room, err)
		}
	}
	mems, errs := mapEveryRank(t, ws, 2, 64<<10)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: 64 KiB after the failure: %v", r, err)
		}
		mems[r][len(mems[r])-1] = 1
		if err := ws[r].Board().UnmapShared(mems[r]); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
