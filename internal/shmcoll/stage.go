package shmcoll

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
)

// The stage: all-reduces above the board's size for a world whose ranks
// all share one host's segment, through shared memory instead of
// messages. Each rank owns a block of the segment's stage area. A chunk
// of the all-reduce (at most StageChunk bytes) goes in two steps:
//
//  1. post: every rank copies its chunk into its block and says so;
//  2. fold: every rank reduces its stripe of the chunk (1/n of it) from
//     every rank's block, in rank order, into its result, copies it to
//     its block's stripe area, and says so; then every rank copies the
//     other stripes into its result.
//
// Every byte crosses the memory bus a fixed number of times whatever the
// number of ranks (copy in but for the rank's own stripe, 1/n folded from
// each rank, copy out), there are two synchronisations per chunk instead
// of a ring's 2(n-1) steps, and every rank ends with the same bits (each
// stripe is folded once). The copies into the block bypass the writer's
// cache (kernel.CopyShared): the peers read those lines one reuse ago,
// and a plain copy waits for each to be taken back from their caches,
// which more than halved the stage's bandwidth. (Folding the whole chunk
// on every rank, one synchronisation instead of two, measured slower.)
// This is what shared-memory collectives of MPI libraries do for
// mid-size messages (MPICH's and Intel MPI's shm all-reduce, Open MPI's
// coll/sm).
//
// Chunks are numbered alike on every rank (stage operations run one at a
// time, in sequence-number order, with sizes every rank shares); chunk j
// uses slot j%2. A rank's progress word counts the steps it has finished,
// two per chunk whatever the operation, the first taken only once the
// rank is done with the chunk before (stageBegin). A rank writes slot j%2
// again for chunk j+2 only after every peer has taken the first step of
// chunk j+1: within an all-reduce that is known without looking (each
// rank waits for every peer's post), but after a broadcast, where a rank
// waits for the root only, it must look.
//
// A rank's block (page-aligned, stageBlockSize bytes):
//
//	+0    prog: steps this rank has finished
//	+64   slot 0 header: seq, signature (3 words); +128 slot 1 header
//	+192  slot 0: the chunk (StageChunk bytes), then the folded stripe
//	      (stageStripe bytes); then slot 1 alike
const (
	// StageChunk is the most of an all-reduce a rank posts on the stage
	// at a time: larger chunks overlap less of the ranks' work, smaller
	// ones synchronise more often (see docs/tuning.md).
	StageChunk = 256 << 10

	// StageAroundMin is the size from which a stage all-reduce writes
	// its result around the cache: the fold stores the stripe into the
	// result and the block in one pass (kernel.ReduceAllOut) and the
	// peers' stripes are copied with CopyShared, so that no line of a
	// result too large to stay in the cache is read for ownership before
	// it is written. Results that fit the cache gain nothing from it; from
	// this size they do (see docs/tuning.md).
	StageAroundMin = 8 << 20

	stageStripe    = StageChunk/2 + cacheLine
	stageSlotSize  = StageChunk + stageStripe
	stageBlockSize = (3*cacheLine + 2*stageSlotSize + shmPage - 1) / shmPage * shmPage
)

// stageBlock holds pointers into one rank's stage block.
type stageBlock struct {
	prog   *uint64
	seq    [2]*uint64
	sig    [2][2]*uint64
	chunk  [2][]byte
	stripe [2][]byte
	slot   [2][]byte // chunk and stripe together (the copy collectives' room)
}

func stageBlockAt(mem []byte, off int) stageBlock {
	var b stageBlock
	b.prog = word64(mem, off)
	for s := range 2 {
		h := off + (1+s)*cacheLine
		b.seq[s] = word64(mem, h)
		b.sig[s] = [2]*uint64{word64(mem, h+8), word64(mem, h+16)}
		d := off + 3*cacheLine + s*stageSlotSize
		b.chunk[s] = mem[d : d+StageChunk : d+StageChunk]
		b.stripe[s] = mem[d+StageChunk : d+stageSlotSize : d+stageSlotSize]
		b.slot[s] = mem[d : d+stageSlotSize : d+stageSlotSize]
	}
	return b
}

// stage is a board's stage state.
type stage struct {
	blk    []stageBlock
	chunks uint64    // chunks this rank has started
	steps  uint64    // steps this rank has finished (its prog word)
	first  [2]uint64 // the first step of the last chunk that used each slot
	srcs   [][]byte  // the fold's sources, reused
	mine   []byte    // this rank's share of its stripe, set aside when in place
	own    []byte    // a reduce-scatter's piece of its own block, set aside when in place
	starts []int     // the blocks of a V collective, reused (blocksOf)
	lens   []int
}

// Fold reduces srcs (one per rank, in rank order, of equal length) into
// dst, which does not overlap them; with out not nil, into out as well
// (of dst's length), both written around the cache (kernel.ReduceAllOut).
type Fold func(dst, out []byte, srcs [][]byte) error

// AllReduce runs the all-reduce seq (of signature sig) of send into recv
// (of the same length; they may be the same slice) on the stage: elem is
// the size of one element (stripes are cut between elements), fold
// combines contributions. Every rank of the world must call it for the
// same collectives in the same order, interleaved with Exchange alike. A
// peer that posted another signature at seq, or ran seq elsewhere, is a
// *core.MismatchError.
func (b *Board) AllReduce(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, elem int, fold Fold) error {
	if len(send) != len(recv) {
		return fmt.Errorf("comm: transport: stage all-reduce of %d bytes into %d", len(send), len(recv))
	}
	if elem <= 0 || cacheLine%elem != 0 || len(send)%elem != 0 {
		return fmt.Errorf("comm: transport: stage all-reduce of %d bytes in elements of %d", len(send), elem)
	}
	// Peers waiting on the board for seq learn that this rank runs it
	// here; peers on the stage match it by signature.
	w, err := b.stageOpen(ctx, seq, sig)
	if err != nil {
		return err
	}
	defer b.seg.Release()
	around := len(send) >= StageAroundMin
	for off := 0; off < len(send) || off == 0; off += StageChunk {
		end := min(off+StageChunk, len(send))
		if err := b.stageChunk(&w, send[off:end], recv[off:end], fold, around); err != nil {
			return err
		}
		if end == len(send) {
			break
		}
	}
	return nil
}

// stageChunk runs one chunk of an all-reduce.
func (b *Board) stageChunk(w *boardWait, send, recv []byte, fold Fold, around bool) error {
	st := &b.st
	s, err := b.stageBegin(w)
	if err != nil {
		return err
	}
	me := &st.blk[b.me]
	n := len(send)

	// Post: the chunk (but for this rank's stripe, which only this rank
	// reads, from send), its header, then the progress word's atomic
	// store (a peer that loads it sees everything stored before). The
	// chunk's copy bypasses this core's cache (kernel.CopyShared): the
	// peers read this slot two chunks ago.
	lo, hi := stripe(n, b.n, b.me)
	kernel.CopyShared(me.chunk[s][:lo], send[:lo])
	kernel.CopyShared(me.chunk[s][hi:n], send[hi:])
	b.stageHeader(w, s)
	posted := st.first[s]
	b.stageStep(posted)

	for r := range b.n {
		if r != b.me {
			if err := b.stageWait(w, r, s, posted); err != nil {
				return err
			}
			st.srcs[r] = st.blk[r].chunk[s][lo:hi]
		}
	}
	// Fold this rank's stripe straight into its result (from a copy of
	// its own share when in place), then share the stripe the same way
	// as the chunk.
	st.srcs[b.me] = send[lo:hi]
	if hi > lo && &send[lo] == &recv[lo] {
		st.srcs[b.me] = st.mine[:copy(st.mine, send[lo:hi])]
	}
	if around {
		if err := fold(recv[lo:hi], me.stripe[s][:hi-lo], st.srcs); err != nil {
			return err
		}
	} else {
		if err := fold(recv[lo:hi], nil, st.srcs); err != nil {
			return err
		}
		kernel.CopyShared(me.stripe[s][:hi-lo], recv[lo:hi])
	}
	folded := posted + 1
	b.stageStep(folded)
	// The peers' stripes into the result.
	for i := 1; i < b.n; i++ {
		r := (b.me + i) % b.n
		if err := b.stageWait(w, r, s, folded); err != nil {
			return err
		}
		lo, hi := stripe(n, b.n, r)
		if around {
			kernel.CopyShared(recv[lo:hi], st.blk[r].stripe[s][:hi-lo])
		} else {
			copy(recv[lo:hi], st.blk[r].stripe[s][:hi-lo])
		}
	}
	return nil
}

// stageBegin starts the next chunk: it returns its slot once every peer
// is done with the chunk that used the slot last.
func (b *Board) stageBegin(w *boardWait) (slot int, err error) {
	st := &b.st
	j := st.chunks
	s := int(j & 1)
	if j >= 2 {
		prev := st.first[s^1]
		for r := range b.n {
			if r != b.me {
				p := st.blk[r].prog
				if err := w.until(r, true, func() bool { return atomic.LoadUint64(p) >= prev }); err != nil {
					return s, err
				}
				if w.bad != nil {
					return s, w.bad
				}
			}
		}
	}
	st.chunks++
	st.first[s] = st.steps + 1
	return s, nil
}

// stageStep publishes that this rank has finished step n, and wakes the
// peers that sleep.
func (b *Board) stageStep(n uint64) {
	b.st.steps = n
	atomic.StoreUint64(b.st.blk[b.me].prog, n)
	b.wakePeers()
}

// stageWait waits until rank r has finished step n, then checks the
// header of its slot s.
func (b *Board) stageWait(w *boardWait, r, s int, n uint64) error {
	p := &b.st.blk[r]
	if err := w.until(r, true, func() bool { return atomic.LoadUint64(p.prog) >= n }); err != nil {
		return err
	}
	if w.bad != nil {
		return w.bad
	}
	remote := unpackSig([2]uint64{atomic.LoadUint64(p.sig[s][0]), atomic.LoadUint64(p.sig[s][1])})
	if remote != w.sig {
		return &core.MismatchError{Peer: r, Seq: w.seq, Local: w.sig, Remote: remote}
	}
	if seq := atomic.LoadUint64(p.seq[s]); seq != w.seq {
		return &core.PeerError{Peer: r, Err: fmt.Errorf("comm: transport: rank %d posted collective %d on the shared-memory stage where this rank posted %d (%v): the ranks' stage collectives are out of step",
			r, seq, w.seq, w.sig)}
	}
	return nil
}

// stripe returns rank r's share [lo, hi) of a chunk of n bytes among
// ranks ranks, in whole cache lines (so every cut is between elements,
// whose size divides a line's).
func stripe(n, ranks, r int) (lo, hi int) {
	per := (n + ranks - 1) / ranks
	per = (per + cacheLine - 1) / cacheLine * cacheLine
	lo = min(r*per, n)
	hi = min(lo+per, n)
	return lo, hi
}
