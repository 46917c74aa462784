//go:build linux

package shmcoll

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gocomm/comm/internal/transport"
	"golang.org/x/sys/unix"
)

// TestSharedAllocNoRoom: an allocation larger than the room left in the
// segment's file system (a container's small /dev/shm) fails on every
// rank with an error that says so, instead of a SIGBUS when a page is
// first touched; the world goes on, and a smaller one succeeds.
func TestSharedAllocNoRoom(t *testing.T) {
	requireSHM(t)
	dir := t.TempDir()
	// Room for the segment (rings and collective areas of two ranks) and
	// 1 MiB or more beside it, whatever the segment's layout.
	const room = 16 << 20
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs to fill needs root (CI runs as root)")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", room)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs on %s: %v", room, dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	ws := shmWorldWith(t, 2, transport.SHMOptions{Dir: dir})
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	left := int(st.Bavail) * int(st.Bsize)
	if left < 1<<20 {
		t.Fatalf("%d bytes left of a %d-byte tmpfs after the segment: want 1 MiB or more", left, room)
	}
	_, errs := mapEveryRank(t, ws, 1, left+1<<20)
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: %d bytes in a tmpfs with %d left: no error", r, left+1<<20, left)
		}
		if r == 0 && !strings.Contains(err.Error(), "no room") {
			t.Errorf("rank 0: %d bytes in a tmpfs with %d left: %v, want no room", left+1<<20, left, err)
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
