package optim

import (
	"slices"
	"testing"
)

func TestShareCounts(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    []int
	}{
		{10, 1, []int{10}}, {10, 2, []int{5, 5}}, {10, 3, []int{4, 3, 3}}, {10, 4, []int{3, 3, 2, 2}},
		{2, 4, []int{1, 1, 0, 0}}, {0, 3, []int{0, 0, 0}},
	} {
		if got := shareCounts(tc.n, tc.size); !slices.Equal(got, tc.want) {
			t.Errorf("shareCounts(%d, %d) = %v, want %v", tc.n, tc.size, got, tc.want)
		}
	}
	if got := shareStart([]int{4, 3, 3}, 2); got != 7 {
		t.Errorf("shareStart = %d, want 7", got)
	}
}

// Every element of every gradient of a bucket lies in exactly one rank's
// share, once, at the place the share's layout says; padding between
// gradients lies in none.
func TestShareSegmentsCoverEveryElementOnce(t *testing.T) {
	layouts := [][]bucketPiece{
		{{grad: 0, off: 0, n: 7}},
		{{grad: 3, off: 0, n: 5}, {grad: 1, off: 5, n: 1}, {grad: 2, off: 6, n: 13}},
		{{grad: 2, off: 10, n: 4}, {grad: 0, off: 0, n: 8}}, // unsorted, with padding at 8..10
		{{grad: 0, off: 0, n: 1}, {grad: 1, off: 1, n: 1}},
	}
	for li, pieces := range layouts {
		n := 0
		lens := map[int]int{}
		for _, p := range pieces {
			n = max(n, p.off+p.n)
			lens[p.grad] = p.n
		}
		for size := 1; size <= 5; size++ {
			counts := shareCounts(n, size)
			seen := map[[2]int]int{} // (grad, element) -> times
			for r := range size {
				start := shareStart(counts, r)
				for _, s := range shareSegments(pieces, start, counts[r]) {
					if s.from < 0 || s.to > lens[s.grad] || s.from >= s.to || s.at < 0 || s.at+s.to-s.from > counts[r] {
						t.Fatalf("layout %d size %d rank %d: bad segment %+v", li, size, r, s)
					}
					for e := s.from; e < s.to; e++ {
						seen[[2]int{s.grad, e}]++
					}
					// The segment's share offset is the element's bucket
					// offset less the share's start.
					for _, p := range pieces {
						if p.grad == s.grad && p.off+s.from-start != s.at {
							t.Errorf("layout %d size %d rank %d: segment %+v at %d, want %d", li, size, r, s, s.at, p.off+s.from-start)
						}
					}
				}
			}
			for g, l := range lens {
				for e := range l {
					if seen[[2]int{g, e}] != 1 {
						t.Errorf("layout %d size %d: gradient %d element %d in %d shares", li, size, g, e, seen[[2]int{g, e}])
					}
				}
			}
		}
	}
}

func TestCheckPieces(t *testing.T) {
	params := [][]float32{make([]float32, 3), make([]float32, 2)}
	if err := checkPieces(0, []bucketPiece{{1, 0, 2}, {0, 4, 3}}, 7, params); err != nil {
		t.Errorf("a good layout with padding: %v", err)
	}
	for _, bad := range [][]bucketPiece{
		{{2, 0, 2}},            // no such gradient
		{{0, 0, 2}},            // wrong length
		{{0, 0, 3}, {1, 2, 2}}, // overlap
		{{0, 5, 3}},            // past the end
	} {
		if err := checkPieces(0, bad, 7, params); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
