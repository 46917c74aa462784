//go:build linux && !gocomm_portable

package transport

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSHMRingsPrefaulted checks that every page of every ring a rank
// sends or receives through is in memory once the endpoint is connected,
// before the first message: no send or receive of the ring's first lap
// takes a page fault (on a virtual machine with lazily supplied memory
// one cost ~35 us, a stall every 32nd small all-reduce for a whole lap).
func TestSHMRingsPrefaulted(t *testing.T) {
	ws := shmWorld(t, 3)
	for _, w := range ws {
		e := w.shm
		for _, o := range e.outs {
			checkResident(t, w.Rank(), "to", o.peer, o.d)
		}
		for _, in := range e.ins {
			checkResident(t, w.Rank(), "from", in.peer, in.d)
		}
	}
}

func checkResident(t *testing.T, rank int, dir string, peer int, ring []byte) {
	t.Helper()
	vec := make([]byte, (len(ring)+shmPage-1)/shmPage)
	// x/sys/unix has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&ring[0])), uintptr(len(ring)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("rank %d: ring %s rank %d: %d of %d pages not in memory after connecting", rank, dir, peer, missing, len(vec))
	}
}
