package native

import (
	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/internal/kernel"
)

// The lazy copy of an out-of-place input: the bookkeeping of which element
// ranges of Work still stand for the caller's input (execution.lazySrc)
// rather than holding a copy of it.

// elemRange is the element range [lo, hi).
type elemRange struct{ lo, hi int }

// lazyCopy makes work stand for a copy of src (of work's length) without
// copying it yet. Each range is copied at most once and only where
// needed: a send of a range still pending reads src instead; a reducing
// receive into one writes src op received (kernel.ReduceTo) instead of
// reducing into a copy; a receive or copy that overwrites one drops it;
// run copies what is left at the end. An out-of-place all-reduce so
// skips copying its input (the ring all-gather overwrites most of it).
func (e *execution) lazyCopy(src []byte) {
	e.lazySrc = src
	e.pending = append(e.pending[:0], elemRange{0, len(src) / e.esize})
}

// covered reports whether work[off:off+n] (elements) still stands for
// the same range of lazySrc. A range only partly pending has its pending
// parts copied now and is no longer.
func (e *execution) covered(off, n int) bool {
	if len(e.pending) == 0 || n == 0 {
		return false
	}
	for _, r := range e.pending {
		if r.lo <= off && off+n <= r.hi {
			return true
		}
	}
	e.settle(off, off+n)
	return false
}

// settle copies the pending parts of [lo, hi) from lazySrc into work.
func (e *execution) settle(lo, hi int) {
	for _, r := range e.pending {
		if a, b := max(r.lo, lo), min(r.hi, hi); a < b {
			copy(e.span(algo.Work, a, b-a), e.lazySrc[a*e.esize:b*e.esize])
		}
	}
	e.drop(lo, hi)
}

// drop takes [lo, hi) out of the pending ranges.
func (e *execution) drop(lo, hi int) {
	if len(e.pending) == 0 || lo >= hi {
		return
	}
	var kept []elemRange
	for _, r := range e.pending {
		if r.hi <= lo || hi <= r.lo {
			kept = append(kept, r)
			continue
		}
		if r.lo < lo {
			kept = append(kept, elemRange{r.lo, lo})
		}
		if hi < r.hi {
			kept = append(kept, elemRange{hi, r.hi})
		}
	}
	e.pending = kept
}

// payload is what a send reads: lazySrc for a range of work that still
// stands for it.
func (e *execution) payload(x algo.Xfer) []byte {
	if x.Buf == algo.Work && e.covered(x.Off, x.Len) {
		return e.lazySrc[x.Off*e.esize : (x.Off+x.Len)*e.esize]
	}
	return e.span(x.Buf, x.Off, x.Len)
}

// reduceInto finishes a reducing receive of x: dst op= got, or, where dst
// still stands for lazySrc (fromSrc), dst = lazySrc op got. A user-defined
// op goes through reduceUser.
func (e *execution) reduceInto(x algo.Xfer, got []byte, fromSrc bool) error {
	dst := e.span(algo.Work, x.Off, x.Len)
	if u := e.req.User; u != nil {
		var src []byte
		if fromSrc {
			src = e.lazySrc[x.Off*e.esize : (x.Off+x.Len)*e.esize]
		}
		return e.reduceUser(u, x.Peer, dst, src, got)
	}
	if fromSrc {
		return kernel.ReduceTo(e.req.DType, e.req.Op, dst, e.lazySrc[x.Off*e.esize:(x.Off+x.Len)*e.esize], got)
	}
	return kernel.Reduce(e.req.DType, e.req.Op, dst, got)
}
