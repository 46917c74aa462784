package ddp

import (
	"slices"
	"testing"
)

func TestAssignBuckets(t *testing.T) {
	cases := []struct {
		order, numel        []int
		elem, first, bucket int
		want                [][]int
	}{
		{nil, nil, 4, 8, 16, nil},
		// The first bucket is capped at 8 bytes, the others at 16.
		{[]int{3, 2, 1, 0}, []int{1, 1, 1, 1}, 4, 8, 16, [][]int{{3, 2}, {1, 0}}},
		{[]int{0, 1, 2, 3, 4, 5}, []int{1, 1, 1, 1, 1, 1}, 4, 4, 12, [][]int{{0}, {1, 2, 3}, {4, 5}}},
		// A gradient larger than the cap is a bucket of its own.
		{[]int{0, 1, 2}, []int{1, 10, 1}, 4, 8, 16, [][]int{{0}, {1}, {2}}},
		{[]int{0, 1, 2}, []int{10, 1, 1}, 4, 8, 16, [][]int{{0}, {1, 2}}},
		// Empty gradients join whichever bucket is open.
		{[]int{0, 1, 2}, []int{0, 2, 0}, 4, 8, 16, [][]int{{0, 1, 2}}},
		// A cap below one element: one gradient per bucket.
		{[]int{1, 0}, []int{1, 1}, 8, 1, 1, [][]int{{1}, {0}}},
	}
	for _, tc := range cases {
		got := assignBuckets(tc.order, tc.numel, tc.elem, tc.first, tc.bucket)
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("assignBuckets(%v, %v, %d, %d, %d) = %v, want %v", tc.order, tc.numel, tc.elem, tc.first, tc.bucket, got, tc.want)
		}
	}
}

// TestAssignBucketsProperties: over many random models, every gradient is
// in exactly one bucket, in the given order, and a bucket exceeds its cap
// only when it is a single gradient.
func TestAssignBucketsProperties(t *testing.T) {
	for seed := range 200 {
		n := seed%17 + 1
		numel := make([]int, n)
		for i := range numel {
			numel[i] = (seed*31 + i*17) % 23
		}
		order := defaultOrder(n)
		first, bucket := seed%7*4+1, seed%11*8+1
		got := assignBuckets(order, numel, 4, first, bucket)
		if flat := slices.Concat(got...); !slices.Equal(flat, order) {
			t.Fatalf("seed %d: buckets %v do not hold %v in order", seed, got, order)
		}
		for k, b := range got {
			limit := bucket
			if k == 0 {
				limit = first
			}
			size := 0
			for _, g := range b {
				size += 4 * numel[g]
			}
			if size > limit && len(b) > 1 {
				t.Fatalf("seed %d: bucket %d %v holds %d bytes, over its cap %d", seed, k, b, size, limit)
			}
		}
		ls := layouts(got, numel, 0)
		for k, l := range ls {
			if l.Index != k || len(l.Offsets) != len(l.Grads) {
				t.Fatalf("seed %d: layout %d: %+v", seed, k, l)
			}
			off := 0
			for j, g := range l.Grads {
				if l.Offsets[j] != off {
					t.Fatalf("seed %d: layout %d: %+v: want offset %d for gradient %d", seed, k, l, off, g)
				}
				off += numel[g]
			}
			if l.Len != off {
				t.Fatalf("seed %d: layout %d: Len %d, want %d", seed, k, l.Len, off)
			}
		}
	}
}

func TestRankList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{2}, "rank 2"},
		{[]int{0, 1}, "ranks 0-1"},
		{[]int{0, 2}, "ranks 0, 2"},
		{[]int{0, 1, 2, 3, 5, 7, 8}, "ranks 0-3, 5, 7-8"},
	} {
		if got := rankList(tc.in); got != tc.want {
			t.Errorf("rankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
