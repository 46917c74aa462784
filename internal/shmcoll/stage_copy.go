package shmcoll

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
)

// The stage's copy collectives: broadcast, all-to-all, all-gather and
// reduce-scatter of a world whose ranks all share one host's segment,
// through the ranks' stage blocks, in chunks numbered with the
// all-reduce's (stage.go).
//
// A broadcast's root copies a chunk into its slot once, with stores that
// bypass its cache, and every other rank copies it out: n copies of each
// byte in all, against 2(n-1) through the rings and n-1 by single copy,
// whose copies across processes pin the sender's pages one by one and run
// at a fraction of a memmove's speed. An all-to-all's rank posts a
// piece of every peer's block in its slot, and every rank copies its
// pieces out of every peer's: two copies of each byte, with no pair of
// ranks that must run at once as a ring's two ends must. An all-gather
// is an all-to-all whose rank posts one piece for every peer, a
// reduce-scatter one that folds the pieces instead of copying them.

// stageCopyChunk is the most a rank posts in its slot at a time in the
// copy collectives: the all-reduce's chunk and stripe areas together.
const stageCopyChunk = stageSlotSize / cacheLine * cacheLine

// Broadcast runs the broadcast seq (of signature sig) of root's buf into
// every rank's buf (of the same length) on the stage. Every rank of the
// world must call it for the same collectives in the same order as the
// stage's and board's others. A peer that posted another signature at
// seq, or ran seq elsewhere, is a *core.MismatchError.
//
// Each chunk goes in two steps: first every rank says it is done with
// the chunk before (the root with the chunk posted), then every rank but
// the root copies the chunk out and says so. The root waits for every
// rank's copy of the last chunk before it returns, so that a rank that
// ran another collective is a mismatch on the root too.
func (b *Board) Broadcast(ctx context.Context, seq uint64, sig core.Signature, root int, buf []byte) error {
	if root < 0 || root >= b.n {
		return fmt.Errorf("comm: transport: stage broadcast from rank %d of %d", root, b.n)
	}
	w, err := b.stageOpen(ctx, seq, sig)
	if err != nil {
		return err
	}
	defer b.seg.Release()
	st := &b.st
	me := &st.blk[b.me]
	src := &st.blk[root]
	last := 0
	for off := 0; off < len(buf) || off == 0; off += stageCopyChunk {
		end := min(off+stageCopyChunk, len(buf))
		s, err := b.stageBegin(&w)
		if err != nil {
			return err
		}
		last = s
		first := st.first[s]
		if b.me == root {
			kernel.CopyShared(me.slot[s][:end-off], buf[off:end])
			b.stageHeader(&w, s)
			b.stageStep(first + 1)
		} else {
			b.stageHeader(&w, s)
			b.stageStep(first)
			if err := b.stageWait(&w, root, s, first); err != nil {
				return err
			}
			copy(buf[off:end], src.slot[s][:end-off])
			b.stageStep(first + 1)
		}
		if end == len(buf) {
			break
		}
	}
	if b.me == root {
		for r := range b.n {
			if r != b.me {
				if err := b.stageWait(&w, r, last, st.steps); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// AllToAll runs the all-to-all seq (of signature sig) of send into recv on
// the stage: both hold one block of len(send)/n bytes per rank, in rank
// order; block r of send goes to rank r, block r of recv comes from rank
// r. They may be the same slice. Every rank of the world must call it for
// the same collectives in the same order as the stage's and board's
// others. A peer that posted another signature at seq, or ran seq
// elsewhere, is a *core.MismatchError.
//
// Each chunk carries a piece of every block: a rank posts its pieces for
// every peer, copies its own block's piece, then copies its piece out of
// every peer's slot. In place, a piece of recv is written only after the
// same piece of send has been posted.
func (b *Board) AllToAll(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte) error {
	if len(send) != len(recv) || len(send)%b.n != 0 {
		return fmt.Errorf("comm: transport: stage all-to-all of %d bytes into %d among %d ranks", len(send), len(recv), b.n)
	}
	w, err := b.stageOpen(ctx, seq, sig)
	if err != nil {
		return err
	}
	defer b.seg.Release()
	blk := len(send) / b.n
	return b.stageBlocks(&w, send, evenBlocks(blk), func(s, off, m int) error {
		own := b.me*blk + off
		copy(recv[own:own+m], send[own:own+m])
		for i := 1; i < b.n; i++ {
			r := (b.me + i) % b.n
			p, err := b.peerPiece(&w, r, s, m)
			if err != nil {
				return err
			}
			copy(recv[r*blk+off:][:m], p)
		}
		return nil
	})
}

// AllGather runs the all-gather seq (of signature sig) of send into recv
// on the stage: recv holds n blocks of len(send) bytes, block r from rank
// r; send may be this rank's own block of recv. Every rank of the world
// must call it for the same collectives in the same order as the stage's
// and board's others. A peer that posted another signature at seq, or
// ran seq elsewhere, is a *core.MismatchError.
//
// Each chunk carries a piece of every block: a rank posts its piece once,
// copies it into its own block of recv, and copies every peer's out of
// the peer's slot.
func (b *Board) AllGather(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte) error {
	if len(recv) != b.n*len(send) {
		return fmt.Errorf("comm: transport: stage all-gather of %d bytes into %d among %d ranks", len(send), len(recv), b.n)
	}
	return b.allGather(ctx, seq, sig, send, recv, evenBlocks(len(send)))
}

// AllGatherV is AllGather with blocks of counts[r] elements of elem
// bytes from rank r, one after another in recv; send is this rank's
// counts[rank] elements.
func (b *Board) AllGatherV(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, counts []int, elem int) error {
	bl, err := b.blocksOf(counts, elem, len(recv))
	if err != nil {
		return fmt.Errorf("comm: transport: stage all-gather-v into %d bytes: %v", len(recv), err)
	}
	if _, n := bl.at(b.me); n != len(send) {
		return fmt.Errorf("comm: transport: stage all-gather-v of %d bytes where rank %d's block is %d", len(send), b.me, n)
	}
	return b.allGather(ctx, seq, sig, send, recv, bl)
}

// allGather is AllGather and AllGatherV: every rank runs as many chunks
// as the longest block needs, and copies of each block what remains of it.
func (b *Board) allGather(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, bl blocks) error {
	w, err := b.stageOpen(ctx, seq, sig)
	if err != nil {
		return err
	}
	defer b.seg.Release()
	st := &b.st
	me := &st.blk[b.me]
	span := bl.longest()
	for off := 0; off < span || off == 0; off += stageCopyChunk {
		s, err := b.stageBegin(&w)
		if err != nil {
			return err
		}
		first := st.first[s]
		mine := bl.piece(b.me, off, stageCopyChunk)
		own, _ := bl.at(b.me)
		if mine > 0 {
			kernel.CopyShared(me.slot[s][:mine], send[off:off+mine])
		}
		b.stageHeader(&w, s)
		b.stageStep(first)
		if mine > 0 {
			copy(recv[own+off:][:mine], send[off:off+mine])
		}
		for i := 1; i < b.n; i++ {
			r := (b.me + i) % b.n
			if err := b.stageWait(&w, r, s, first); err != nil {
				return err
			}
			if m := bl.piece(r, off, stageCopyChunk); m > 0 {
				at, _ := bl.at(r)
				copy(recv[at+off:][:m], st.blk[r].slot[s][:m])
			}
		}
		b.stageStep(first + 1)
		if off+stageCopyChunk >= span {
			break
		}
	}
	return nil
}

// ReduceScatter runs the reduce-scatter seq (of signature sig) of send
// into recv on the stage: send holds n blocks of len(recv) bytes, block r
// folded across the ranks (in rank order) into rank r's recv. elem and
// fold are as for AllReduce. Every rank of the world must call it for the
// same collectives in the same order as the stage's and board's others.
// A peer that posted another signature at seq, or ran seq elsewhere, is a
// *core.MismatchError.
//
// Each chunk carries a piece of every block: a rank posts its pieces of
// the peers' blocks, as in AllToAll, then folds its own block's piece
// from its send and every peer's slot.
func (b *Board) ReduceScatter(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, elem int, fold Fold) error {
	blk := len(recv)
	if len(send) != b.n*blk {
		return fmt.Errorf("comm: transport: stage reduce-scatter of %d bytes into %d among %d ranks", len(send), len(recv), b.n)
	}
	if elem <= 0 || cacheLine%elem != 0 || blk%elem != 0 {
		return fmt.Errorf("comm: transport: stage reduce-scatter of %d-byte blocks in elements of %d", blk, elem)
	}
	return b.reduceScatter(ctx, seq, sig, send, recv, evenBlocks(blk), fold)
}

// ReduceScatterV is ReduceScatter with blocks of counts[r] elements of
// elem bytes for rank r, one after another in send; recv is this rank's
// counts[rank] elements.
func (b *Board) ReduceScatterV(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, counts []int, elem int, fold Fold) error {
	if elem <= 0 || cacheLine%elem != 0 {
		return fmt.Errorf("comm: transport: stage reduce-scatter-v in elements of %d", elem)
	}
	bl, err := b.blocksOf(counts, elem, len(send))
	if err != nil {
		return fmt.Errorf("comm: transport: stage reduce-scatter-v of %d bytes: %v", len(send), err)
	}
	if _, n := bl.at(b.me); n != len(recv) {
		return fmt.Errorf("comm: transport: stage reduce-scatter-v into %d bytes where rank %d's block is %d", len(recv), b.me, n)
	}
	return b.reduceScatter(ctx, seq, sig, send, recv, bl, fold)
}

// reduceScatter is ReduceScatter and ReduceScatterV.
func (b *Board) reduceScatter(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, bl blocks, fold Fold) error {
	w, err := b.stageOpen(ctx, seq, sig)
	if err != nil {
		return err
	}
	defer b.seg.Release()
	st := &b.st
	at, n := bl.at(b.me)
	own := send[at : at+n]
	overlap := n > 0 && overlaps(own, recv)
	if overlap && len(st.own) < stagePiece(b.n) {
		st.own = make([]byte, stagePiece(b.n))
	}
	return b.stageBlocks(&w, send, bl, func(s, off, m int) error {
		for r := range b.n {
			if r != b.me {
				p, err := b.peerPiece(&w, r, s, m)
				if err != nil {
					return err
				}
				st.srcs[r] = p
			}
		}
		if m == 0 {
			return nil // this rank's block has ended; the peers' have not
		}
		st.srcs[b.me] = own[off : off+m]
		if overlap {
			st.srcs[b.me] = st.own[:copy(st.own, own[off:off+m])]
		}
		return fold(recv[off:off+m], nil, st.srcs)
	})
}

// blocks places one block per rank in a buffer: uniform blocks of blk
// bytes (lens nil), or block d at starts[d], lens[d] bytes.
type blocks struct {
	blk          int
	starts, lens []int
}

// evenBlocks are blocks of blk bytes each.
func evenBlocks(blk int) blocks { return blocks{blk: blk} }

// blocksOf lays out blocks of counts[d] elements of elem bytes, one after
// another, in a buffer of total bytes, in slices the board reuses.
func (b *Board) blocksOf(counts []int, elem, total int) (blocks, error) {
	if len(counts) != b.n {
		return blocks{}, fmt.Errorf("%d counts among %d ranks", len(counts), b.n)
	}
	st := &b.st
	if len(st.starts) != b.n {
		st.starts, st.lens = make([]int, b.n), make([]int, b.n)
	}
	at := 0
	for d, c := range counts {
		if c < 0 {
			return blocks{}, fmt.Errorf("count %d for rank %d", c, d)
		}
		st.starts[d], st.lens[d] = at, c*elem
		at += c * elem
	}
	if at != total {
		return blocks{}, fmt.Errorf("counts %v of %d-byte elements make %d bytes", counts, elem, at)
	}
	return blocks{starts: st.starts, lens: st.lens}, nil
}

// at is where block d starts and its length.
func (bl blocks) at(d int) (start, n int) {
	if bl.lens == nil {
		return d * bl.blk, bl.blk
	}
	return bl.starts[d], bl.lens[d]
}

// longest is the longest block's length.
func (bl blocks) longest() int {
	if bl.lens == nil {
		return bl.blk
	}
	return slices.Max(bl.lens)
}

// piece is how much of block d a chunk of at most size bytes from off
// carries: none once the block has ended.
func (bl blocks) piece(d, off, size int) int {
	_, n := bl.at(d)
	return max(0, min(size, n-off))
}

// stageOpen starts a stage collective: it holds the mapping (the caller
// releases mapMu) and records that this rank runs seq on the stage.
func (b *Board) stageOpen(ctx context.Context, seq uint64, sig core.Signature) (boardWait, error) {
	if err := b.seg.Hold(); err != nil {
		return boardWait{}, err
	}
	b.Enter(seq, sig)
	return boardWait{b: b, ctx: ctx, seq: seq, sig: sig, stage: true}, nil
}

// stagePiece is how much of a slot a rank gives each of its n-1 peers
// in AllToAll and ReduceScatter.
func stagePiece(n int) int { return stageCopyChunk / (n - 1) / cacheLine * cacheLine }

// stageBlocks runs the chunks of a collective in which rank d gets block
// d of every rank's send (placed by bl): in each chunk a rank posts its
// piece of every peer's block (its piece for the peer d places after it
// at (d-me-1) mod n pieces into its slot s), then take uses the chunk's
// pieces of its own block (at off, m bytes each; peerPiece gives the
// peers'). Every rank runs as many chunks as the longest block needs; a
// block that has ended has pieces of no bytes.
func (b *Board) stageBlocks(w *boardWait, send []byte, bl blocks, take func(s, off, m int) error) error {
	st := &b.st
	me := &st.blk[b.me]
	piece := stagePiece(b.n)
	span := bl.longest()
	for off := 0; off < span || off == 0; off += piece {
		s, err := b.stageBegin(w)
		if err != nil {
			return err
		}
		first := st.first[s]
		for i := 1; i < b.n; i++ {
			d := (b.me + i) % b.n
			if m := bl.piece(d, off, piece); m > 0 {
				at, _ := bl.at(d)
				kernel.CopyShared(me.slot[s][(i-1)*piece:][:m], send[at+off:][:m])
			}
		}
		b.stageHeader(w, s)
		b.stageStep(first)
		if err := take(s, off, bl.piece(b.me, off, piece)); err != nil {
			return err
		}
		b.stageStep(first + 1)
		if off+piece >= span {
			break
		}
	}
	return nil
}

// peerPiece waits for rank r's post of slot s in stageBlocks, then
// returns r's piece (m bytes) for this rank.
func (b *Board) peerPiece(w *boardWait, r, s, m int) ([]byte, error) {
	if err := b.stageWait(w, r, s, b.st.first[s]); err != nil {
		return nil, err
	}
	i := (b.me - r - 1 + b.n) % b.n
	return b.st.blk[r].slot[s][i*stagePiece(b.n):][:m], nil
}

// overlaps reports whether a and b (both non-empty) share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// stageHeader writes the header of this rank's slot s for w's collective.
func (b *Board) stageHeader(w *boardWait, s int) {
	me := &b.st.blk[b.me]
	ws := packSig(w.sig)
	*me.seq[s], *me.sig[s][0], *me.sig[s][1] = w.seq, ws[0], ws[1]
}
