package transport

import (
	"testing"
	"time"
)

// TestBigBuffers: getBig rounds capacities up to a power of two, of at
// least 1 MiB above smallMax (and leaves sizes outside its classes to
// make), and putBig takes back only what getBig could have made; a small
// buffer put back serves the next small get.
func TestBigBuffers(t *testing.T) {
	for _, tt := range []struct{ n, wantCap int }{
		{1, 1}, {8, 8}, {9, 16}, {4<<10 + 1, 8 << 10}, {64 << 10, 64 << 10}, {smallMax, smallMax}, {smallMax + 1, 1 << 20}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
		{3 << 20, 4 << 20}, {1 << 30, 1 << 30}, {1<<30 + 1, 1<<30 + 1},
	} {
		b := getBig(tt.n)
		if len(b) != tt.n || cap(b) != tt.wantCap {
			t.Errorf("getBig(%d): len %d cap %d, want cap %d", tt.n, len(b), cap(b), tt.wantCap)
		}
		putBig(b)
	}
	if c := bigClass(0); c != -1 {
		t.Errorf("bigClass(0) = %d", c)
	}
	putBig(make([]byte, 3<<20)) // not a class size: ignored
	putBig(make([]byte, 3))     // nor here
	putBig(nil)
	if testing.AllocsPerRun(100, func() { putBig(getBig(8)) }) != 0 {
		t.Error("a small buffer taken and put back allocates")
	}
}

// TestUnexpectedMessagesPooled: a TCP message that arrives before its
// receive is posted is read into a recycled buffer at every size up to
// pooledMax, so a loop of such messages allocates no more than one of 8
// bytes (fresh memory page-faults on a VM; see smallMax): nothing where
// reads poll, and what the net package's blocking calls allocate per
// message elsewhere (not Linux, or gocomm_portable).
func TestUnexpectedMessagesPooled(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops some of what it is given")
	}
	eps, err := connectTCPWorld(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll([]Endpoint{eps[0], eps[1]})
	ctx := tctx(t)
	base := -1.0
	for _, n := range []int{8, 4<<10 + 1, 16 << 10, 32 << 10, 64 << 10, 256 << 10} {
		msg, buf := make([]byte, n), make([]byte, n)
		var err error
		once := func() {
			if err == nil {
				err = eps[0].Send(ctx, 1, Header{Tag: 5}, msg)
			}
			time.Sleep(200 * time.Microsecond) // the message arrives unexpected
			if err == nil {
				_, err = eps[1].Recv(ctx, 0, Header{Tag: 5}, buf)
			}
		}
		for range 10 {
			once()
		}
		allocs := testing.AllocsPerRun(50, once)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if base < 0 {
			base = allocs
			if pollingReads && base != 0 {
				t.Errorf("8 bytes: %v allocations per unexpected message, want 0", base)
			}
			continue
		}
		if allocs > base {
			t.Errorf("%d bytes: %v allocations per unexpected message, want %v as for 8 bytes", n, allocs, base)
		}
	}
}
