package optim

import (
	"cmp"
	"fmt"
	"slices"
)

// shareCounts splits n elements over size ranks as evenly as they go: the
// first n%size ranks take one more. It is the counts argument of the
// bucket's ReduceScatterV and AllGatherV.
func shareCounts(n, size int) []int {
	counts := make([]int, size)
	for r := range counts {
		counts[r] = n / size
		if r < n%size {
			counts[r]++
		}
	}
	return counts
}

// shareStart is where rank's share begins in a bucket split by counts.
func shareStart(counts []int, rank int) int {
	start := 0
	for _, n := range counts[:rank] {
		start += n
	}
	return start
}

// segment is a piece of a rank's share that lies in one gradient: the
// share's elements at..at+to-from are elements from..to of gradient (and
// parameter tensor) grad.
type segment struct {
	grad, from, to int
	at             int
}

// bucketPiece places gradient grad (of n elements) at offset off of a
// bucket.
type bucketPiece struct{ grad, off, n int }

// shareSegments returns the pieces of the bucket range [start, start+count)
// that gradients cover, in bucket order. Elements no gradient covers
// (padding between gradients, if a bucket has any) belong to no segment.
func shareSegments(pieces []bucketPiece, start, count int) []segment {
	pieces = slices.Clone(pieces)
	slices.SortFunc(pieces, func(a, b bucketPiece) int { return cmp.Compare(a.off, b.off) })
	var segs []segment
	end := start + count
	for _, p := range pieces {
		lo, hi := max(p.off, start), min(p.off+p.n, end)
		if lo >= hi {
			continue
		}
		segs = append(segs, segment{grad: p.grad, from: lo - p.off, to: hi - p.off, at: lo - start})
	}
	return segs
}

// checkPieces reports a bucket layout that does not fit its length or
// whose gradients overlap or do not match the parameters' lengths: the
// partition would then update the wrong elements.
func checkPieces(bucket int, pieces []bucketPiece, n int, params [][]float32) error {
	sorted := slices.Clone(pieces)
	slices.SortFunc(sorted, func(a, b bucketPiece) int { return cmp.Compare(a.off, b.off) })
	end := 0
	for _, p := range sorted {
		switch {
		case p.grad < 0 || p.grad >= len(params):
			return fmt.Errorf("optim: ZeRO: the Reducer's bucket %d holds gradient %d of %d", bucket, p.grad, len(params))
		case p.n != len(params[p.grad]):
			return fmt.Errorf("optim: ZeRO: the Reducer's bucket %d holds %d values of gradient %d, its parameters %d", bucket, p.n, p.grad, len(params[p.grad]))
		case p.off < end || p.off+p.n > n:
			return fmt.Errorf("optim: ZeRO: the Reducer's bucket %d (%d values): gradient %d at %d..%d overlaps another or the end", bucket, n, p.grad, p.off, p.off+p.n)
		}
		end = p.off + p.n
	}
	return nil
}
