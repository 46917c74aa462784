package transport

import "testing"

// TestBigBuffers: getBig rounds capacities up to a power of two, of at
// least 1 MiB above smallMax (and leaves sizes outside its classes to
// make), and putBig takes back only what getBig could have made; a small
// buffer put back serves the next small get.
func TestBigBuffers(t *testing.T) {
	for _, tt := range []struct{ n, wantCap int }{
		{1, 1}, {8, 8}, {9, 16}, {smallMax, smallMax}, {smallMax + 1, 1 << 20}, {64 << 10, 1 << 20}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
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
