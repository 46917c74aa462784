package native

import (
	"bytes"
	"testing"
)

// TestWholeElems: pieces cut anywhere, elements split across two or more
// of them included, reach reduce cut on element boundaries, at the right
// offsets, every byte once.
func TestWholeElems(t *testing.T) {
	msg := make([]byte, 96)
	for i := range msg {
		msg[i] = byte(i + 1)
	}
	for _, esize := range []int{1, 2, 4, 8, 16} {
		for _, cuts := range [][]int{{96}, {1, 95}, {3, 5, 7, 81}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 80}, {17, 33, 46}} {
			got := make([]byte, len(msg))
			seen := make([]int, len(msg))
			sink := wholeElems(esize, func(off int, p []byte) {
				if off%esize != 0 || len(p)%esize != 0 || len(p) == 0 {
					t.Fatalf("esize %d cuts %v: reduce got %d bytes at offset %d", esize, cuts, len(p), off)
				}
				copy(got[off:], p)
				for i := range p {
					seen[off+i]++
				}
			})
			off := 0
			for _, c := range cuts {
				sink(off, msg[off:off+c])
				off += c
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("esize %d cuts %v: reduce saw %v, want %v", esize, cuts, got, msg)
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("esize %d cuts %v: byte %d passed %d times", esize, cuts, i, n)
				}
			}
		}
	}
}
