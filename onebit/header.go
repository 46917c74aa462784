package onebit

import (
	"fmt"
	"math"

	"github.com/gocomm/comm"
)

// header is what a rank tells the others before the compressed exchange:
// whether its arguments are usable, the lengths it was given, and its
// worker scale.
type header struct {
	code  problem
	numel int // len(buf)
	w     int // len(st.WorkerError)
	c     int // len(st.ServerError)
	scale float32
}

// headerWords is the length of a header on the wire, in uint64s.
const headerWords = 5

// problem names what is wrong with a rank's arguments.
type problem uint64

const (
	ok problem = iota
	nilState
	notMultiple // W is not a multiple of 8*N
	tooShort    // W < numel
	serverLen   // len(ServerError) != W/N
)

// localHeader checks this rank's arguments; it needs nothing from the
// other ranks.
func localHeader(numel int, st *State, n int) header {
	if st == nil {
		return header{code: nilState, numel: numel}
	}
	h := header{numel: numel, w: len(st.WorkerError), c: len(st.ServerError)}
	switch {
	case h.w%(8*n) != 0:
		h.code = notMultiple
	case h.w < numel:
		h.code = tooShort
	case h.c != h.w/n:
		h.code = serverLen
	}
	return h
}

func (h header) words() []uint64 {
	return []uint64{uint64(h.code), uint64(h.numel), uint64(h.w), uint64(h.c), uint64(math.Float32bits(h.scale))}
}

func headerOf(w []uint64) header {
	return header{code: problem(w[0]), numel: int(w[1]), w: int(w[2]), c: int(w[3]), scale: math.Float32frombits(uint32(w[4]))}
}

// err describes h's problem as seen by rank self; h is rank r's header, in
// a world of n ranks.
func (h header) err(r, self, n int) error {
	if h.code == ok {
		return nil
	}
	where := "onebit.AllReduce"
	if r != self {
		where = fmt.Sprintf("onebit.AllReduce: rank %d", r)
	}
	var what string
	switch h.code {
	case nilState:
		what = "nil State: make one with NewState(numel, Size())"
	case notMultiple:
		what = fmt.Sprintf("len(st.WorkerError) = %d is not a multiple of 8*Size(): make the state with NewState(len(buf), Size())", h.w)
	case tooShort:
		what = fmt.Sprintf("len(st.WorkerError) = %d is less than len(buf) = %d: make the state with NewState(len(buf), Size())", h.w, h.numel)
	case serverLen:
		what = fmt.Sprintf("len(st.ServerError) = %d, want len(st.WorkerError)/Size() = %d", h.c, h.w/n)
	default:
		what = fmt.Sprintf("unknown problem %d", h.code)
	}
	return fmt.Errorf("%w: %s: %s", comm.ErrInvalid, where, what)
}

// agree returns the same verdict on every rank from every rank's header:
// the first rank with bad arguments, or ranks that disagree on W.
func agree(hs []header, self int) error {
	for r, h := range hs {
		if h.code != ok {
			return h.err(r, self, len(hs))
		}
	}
	for r, h := range hs {
		if h.w != hs[0].w {
			return fmt.Errorf("%w: onebit.AllReduce: ranks disagree on len(st.WorkerError): rank 0 has %d, rank %d has %d: every rank must use the same padded length", comm.ErrInvalid, hs[0].w, r, h.w)
		}
	}
	return nil
}
