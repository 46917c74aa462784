package onebit

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gocomm/comm"
	kernel "github.com/gocomm/comm/internal/onebitkernel"
)

// PaddedLen is DeepSpeed's padded length W for a tensor of numel elements
// on worldSize ranks: numel rounded up to a multiple of
// worldSize*lcm(worldSize, 8) (2 ranks: 16, 3: 72, 4: 32, 8: 64), and
// numel itself when it is already one. It is 0 when numel < 0 or
// worldSize < 1.
func PaddedLen(numel, worldSize int) int {
	if numel < 0 || worldSize < 1 {
		return 0
	}
	unit := worldSize * lcm(worldSize, 8)
	return (numel + unit - 1) / unit * unit
}

func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// State is the error feedback of one tensor on one rank: the caller owns
// it, keeps one per tensor per rank across calls, and passes the same one
// to every AllReduce of that tensor. Its slices are read and written by
// AllReduce (and by nothing else) while a call runs; a State must not be
// used by two calls at once. The errors start at zero; zero them again to
// restart the feedback (DeepSpeed does not checkpoint them either).
//
// W = len(WorkerError) is the padded length every call uses: any multiple
// of 8*Size() that is at least the tensor's length works, NewState picks
// PaddedLen. Every rank must use the same W.
type State struct {
	// WorkerError is this rank's compression error, W values.
	WorkerError []float32
	// ServerError is the error of this rank's server chunk, W/Size()
	// values.
	ServerError []float32

	// scratch holds the packed signs and receive buffers between calls,
	// allocated by the first call that needs them.
	scratch *scratch
}

// NewState returns a zeroed State for a tensor of numel elements on
// worldSize ranks, with W = PaddedLen(numel, worldSize). With numel < 0 or
// worldSize < 1 its slices are empty, and AllReduce reports the problem.
func NewState(numel, worldSize int) *State {
	w := PaddedLen(numel, worldSize)
	if w == 0 {
		return &State{}
	}
	return &State{WorkerError: make([]float32, w), ServerError: make([]float32, w/worldSize)}
}

// AllReduce is DeepSpeed's compressed_allreduce: the error-compensated
// 1-bit average of buf over the ranks of c. It leaves the averaged,
// compressed result in buf (every rank gets the same bits) and updates
// st's errors. Every rank of c calls it with its own buf and State, in the
// same order relative to c's other collectives.
//
// buf (len(buf) = numel <= W) is read and then overwritten; it must not
// overlap st's slices. Both belong to the call until it returns. On a
// world of one buf is returned unchanged and st untouched.
//
// Bad input (a nil State, W not a multiple of 8*Size(), W < len(buf),
// len(ServerError) != W/Size(), ranks that disagree on W) makes AllReduce
// return an error wrapping comm.ErrInvalid on every rank, naming the rank
// and what to fix, before any state changes: the ranks agree on their
// arguments in the first exchange, so none of them hangs. A failure of
// communication may leave st updated on some ranks and not on others;
// zero the errors on every rank to restart.
func AllReduce(ctx context.Context, c *comm.Comm, buf []float32, st *State) error {
	if c == nil {
		return fmt.Errorf("%w: onebit.AllReduce: nil communicator", comm.ErrInvalid)
	}
	if !c.IsMember() {
		return fmt.Errorf("%w: onebit.AllReduce", comm.ErrNotMember)
	}
	n, rank := c.Size(), c.Rank()
	h := localHeader(len(buf), st, n)
	if n == 1 {
		return h.err(rank, rank, n)
	}
	var s *scratch
	if h.code == ok {
		s = st.scratchFor(n)
		scale, err := kernel.CompressScale(buf, st.WorkerError, s.signs)
		if err != nil {
			return err
		}
		h.scale = scale
	}

	// Phase 1, part one: every rank's header with its scale. The ranks
	// agree here on whether to go on.
	words := make([]uint64, n*headerWords)
	if err := comm.AllGather(ctx, c, h.words(), words); err != nil {
		return fmt.Errorf("onebit.AllReduce: exchanging scales: %w", err)
	}
	hs := make([]header, n)
	for r := range hs {
		hs[r] = headerOf(words[r*headerWords:])
	}
	if err := agree(hs, rank); err != nil {
		return err
	}
	if h.w == 0 {
		return nil
	}

	// Phase 1, part two: chunk j of the signs goes to rank j; the new
	// worker error is computed while they travel.
	work := comm.StartAllToAll(ctx, c, s.signs, s.recv)
	uerr := kernel.UpdateError(buf, st.WorkerError, s.signs, h.scale)
	if err := work.Wait(); err != nil {
		return fmt.Errorf("onebit.AllReduce: exchanging signs: %w", err)
	}
	if uerr != nil {
		return uerr
	}

	// The server: average this rank's chunk over the ranks, in rank order,
	// and compress it with the server error.
	chunk := len(st.ServerError)
	inv := float32(1 / float64(n))
	m := s.server
	clear(m)
	for j := range n {
		if err := kernel.UnpackAdd(m, s.recv[j*chunk/8:(j+1)*chunk/8], float32(hs[j].scale*inv)); err != nil {
			return err
		}
	}
	own := s.gathered[rank*s.block : (rank+1)*s.block]
	scale, err := kernel.CompressScale(m, st.ServerError, own[:chunk/8])
	if err != nil {
		return err
	}
	if err := kernel.UpdateError(m, st.ServerError, own[:chunk/8], scale); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(own[chunk/8:], math.Float32bits(scale))

	// Phase 2: every rank's server signs and scale, expanded into buf.
	if err := comm.AllGather(ctx, c, own, s.gathered); err != nil {
		return fmt.Errorf("onebit.AllReduce: exchanging server signs: %w", err)
	}
	for j := range n {
		lo := min(j*chunk, len(buf))
		hi := min(lo+chunk, len(buf))
		blk := s.gathered[j*s.block : (j+1)*s.block]
		if err := kernel.Unpack(buf[lo:hi], blk[:chunk/8], math.Float32frombits(binary.LittleEndian.Uint32(blk[chunk/8:]))); err != nil {
			return err
		}
	}
	return nil
}

// StartAllReduce is AllReduce, asynchronous: buf and st belong to the
// operation until the Work is done. Its collectives are issued on c from
// the Work's goroutine, so start no other collective on c before the Work
// is done (run compressed traffic on its own communicator, from c.Split,
// to overlap it with other collectives).
func StartAllReduce(ctx context.Context, c *comm.Comm, buf []float32, st *State) *comm.Work {
	return comm.StartFunc(func() error { return AllReduce(ctx, c, buf, st) })
}

// scratch is a State's working memory for one world size.
type scratch struct {
	n        int
	signs    []byte    // W/8 packed worker signs, chunk j for rank j
	recv     []byte    // W/8: row j is this rank's chunk of rank j's signs
	server   []float32 // W/N: this rank's averaged chunk
	block    int       // bytes per rank in gathered: W/(8N) signs, a scale
	gathered []byte    // N blocks: every rank's server signs and scale
}

// scratchFor returns st's scratch for n ranks, (re)allocated when W or n
// changed.
func (st *State) scratchFor(n int) *scratch {
	w := len(st.WorkerError)
	if s := st.scratch; s != nil && s.n == n && len(s.signs) == w/8 {
		return s
	}
	block := w/(8*n) + 4
	st.scratch = &scratch{
		n:        n,
		signs:    make([]byte, w/8),
		recv:     make([]byte, w/8),
		server:   make([]float32, w/n),
		block:    block,
		gathered: make([]byte, n*block),
	}
	return st.scratch
}
