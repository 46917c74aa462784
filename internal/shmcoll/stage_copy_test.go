package shmcoll

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gocomm/comm/core"
)

// TestStageCopyCollectives runs broadcasts from every root, all-to-alls,
// all-gathers and reduce-scatters (in place or not) of sizes around the
// stage's chunk and its pieces, interleaved with
// stage all-reduces and board exchanges, so that every kind follows every
// other in both slots, on 2-5 ranks: every result is exact on every rank.
func TestStageCopyCollectives(t *testing.T) {
	sizes := []int{0, 8, 4096, 40000, stageCopyChunk - 64, stageCopyChunk, stageCopyChunk + 64, 3*stageCopyChunk + 1000}
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			onEveryBoard(t, shmWorld(t, n), func(r int, b *Board) error {
				return stageCopyRank(t, b, r, n, 7*len(sizes), sizes)
			})
		})
	}
}

func stageCopyRank(t *testing.T, b *Board, r, n, ops int, sizes []int) error {
	seq := uint64(0)
	for op := range ops {
		size := sizes[op%len(sizes)] / 8 * 8
		seq++
		switch op % 7 {
		case 0: // broadcast, then a board exchange
			root := op % n
			buf := make([]byte, size)
			if r == root {
				for i := 0; i < size; i += 8 {
					binary.LittleEndian.PutUint64(buf[i:], stageWord(op, root, i/8))
				}
			}
			if err := b.Broadcast(tctx(t), seq, boardTestSig(size), root, buf); err != nil {
				return fmt.Errorf("op %d, broadcast of %d bytes from %d: %v", op, size, root, err)
			}
			for i := 0; i < size; i += 8 {
				if got, want := binary.LittleEndian.Uint64(buf[i:]), stageWord(op, root, i/8); got != want {
					return fmt.Errorf("op %d, broadcast of %d bytes from %d: word %d is %#x, want %#x", op, size, root, i/8, got, want)
				}
			}
			seq++
			if err := b.Exchange(tctx(t), seq, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {}); err != nil {
				return fmt.Errorf("op %d (board): %v", op, err)
			}
		case 1: // all-to-all, in place every other time
			blk := size / 8 * 8
			send := make([]byte, n*blk)
			for d := range n {
				for i := 0; i < blk; i += 8 {
					binary.LittleEndian.PutUint64(send[d*blk+i:], stageWord(op, r, d<<20|i/8))
				}
			}
			recv := send
			if op%2 == 0 {
				recv = make([]byte, len(send))
			}
			if err := b.AllToAll(tctx(t), seq, boardTestSig(len(send)), send, recv); err != nil {
				return fmt.Errorf("op %d, all-to-all of %d-byte blocks: %v", op, blk, err)
			}
			for q := range n {
				for i := 0; i < blk; i += 8 {
					if got, want := binary.LittleEndian.Uint64(recv[q*blk+i:]), stageWord(op, q, r<<20|i/8); got != want {
						return fmt.Errorf("op %d, all-to-all of %d-byte blocks (in place %v): word %d of block %d is %#x, want %#x",
							op, blk, op%2 == 1, i/8, q, got, want)
					}
				}
			}
		case 3: // all-gather, in place every other time
			blk := size / 8 * 8
			recv := make([]byte, n*blk)
			send := make([]byte, blk)
			if op%2 == 0 {
				send = recv[r*blk : (r+1)*blk]
			}
			for i := 0; i < blk; i += 8 {
				binary.LittleEndian.PutUint64(send[i:], stageWord(op, r, i/8))
			}
			if err := b.AllGather(tctx(t), seq, boardTestSig(blk), send, recv); err != nil {
				return fmt.Errorf("op %d, all-gather of %d-byte blocks: %v", op, blk, err)
			}
			for q := range n {
				for i := 0; i < blk; i += 8 {
					if got, want := binary.LittleEndian.Uint64(recv[q*blk+i:]), stageWord(op, q, i/8); got != want {
						return fmt.Errorf("op %d, all-gather of %d-byte blocks (in place %v): word %d of block %d is %#x, want %#x",
							op, blk, op%2 == 0, i/8, q, got, want)
					}
				}
			}
		case 4: // reduce-scatter, into its own block of send every other time
			blk := size / 8 * 8
			send := make([]byte, n*blk)
			for d := range n {
				for i := 0; i < blk; i += 8 {
					binary.LittleEndian.PutUint64(send[d*blk+i:], stageWord(op, r, d<<20|i/8))
				}
			}
			recv := make([]byte, blk)
			if op%2 == 0 {
				recv = send[r*blk : (r+1)*blk]
			}
			if err := b.ReduceScatter(tctx(t), seq, boardTestSig(blk), send, recv, 8, plainSum); err != nil {
				return fmt.Errorf("op %d, reduce-scatter of %d-byte blocks: %v", op, blk, err)
			}
			for i := 0; i < blk; i += 8 {
				var want uint64
				for q := range n {
					want += stageWord(op, q, r<<20|i/8)
				}
				if got := binary.LittleEndian.Uint64(recv[i:]); got != want {
					return fmt.Errorf("op %d, reduce-scatter of %d-byte blocks (in place %v): word %d is %#x, want %#x", op, blk, op%2 == 0, i/8, got, want)
				}
			}
		case 5: // all-gather-v of uneven blocks (one empty), in place every other time
			counts, at := unevenCounts(size, n, op), 0
			recv := make([]byte, 8*sum(counts))
			for q := range r {
				at += 8 * counts[q]
			}
			send := make([]byte, 8*counts[r])
			if op%2 == 0 {
				send = recv[at : at+len(send)]
			}
			for i := 0; i < len(send); i += 8 {
				binary.LittleEndian.PutUint64(send[i:], stageWord(op, r, i/8))
			}
			if err := b.AllGatherV(tctx(t), seq, boardTestSig(len(recv)), send, recv, counts, 8); err != nil {
				return fmt.Errorf("op %d, all-gather-v of %v: %v", op, counts, err)
			}
			at = 0
			for q := range n {
				for i := range counts[q] {
					if got, want := binary.LittleEndian.Uint64(recv[at+8*i:]), stageWord(op, q, i); got != want {
						return fmt.Errorf("op %d, all-gather-v of %v (in place %v): word %d of block %d is %#x, want %#x", op, counts, op%2 == 0, i, q, got, want)
					}
				}
				at += 8 * counts[q]
			}
		case 6: // reduce-scatter-v of uneven blocks (one empty), into its own block of send every other time
			counts, at := unevenCounts(size, n, op), 0
			for q := range r {
				at += 8 * counts[q]
			}
			send := make([]byte, 8*sum(counts))
			for d, o := range offsetsOf(counts) {
				for i := range counts[d] {
					binary.LittleEndian.PutUint64(send[8*(o+i):], stageWord(op, r, d<<20|i))
				}
			}
			recv := make([]byte, 8*counts[r])
			if op%2 == 0 {
				recv = send[at : at+len(recv)]
			}
			if err := b.ReduceScatterV(tctx(t), seq, boardTestSig(len(send)), send, recv, counts, 8, plainSum); err != nil {
				return fmt.Errorf("op %d, reduce-scatter-v of %v: %v", op, counts, err)
			}
			for i := range counts[r] {
				var want uint64
				for q := range n {
					want += stageWord(op, q, r<<20|i)
				}
				if got := binary.LittleEndian.Uint64(recv[8*i:]); got != want {
					return fmt.Errorf("op %d, reduce-scatter-v of %v (in place %v): word %d is %#x, want %#x", op, counts, op%2 == 0, i, got, want)
				}
			}
		case 2: // all-reduce
			size = max(size, BoardBytes+8)
			send := make([]byte, size)
			for i := 0; i < size; i += 8 {
				binary.LittleEndian.PutUint64(send[i:], stageWord(op, r, i/8))
			}
			recv := make([]byte, size)
			if err := b.AllReduce(tctx(t), seq, boardTestSig(size), send, recv, 8, plainSum); err != nil {
				return fmt.Errorf("op %d, all-reduce of %d bytes: %v", op, size, err)
			}
			if err := checkStageSums(recv, op, n); err != nil {
				return fmt.Errorf("op %d, all-reduce of %d bytes: %v", op, size, err)
			}
		}
	}
	return nil
}

// unevenCounts are per-rank element counts for a V collective of about
// size bytes per rank: rank d's grows with d, and the last rank's is empty
// every other op, so that blocks end in different chunks.
func unevenCounts(size, n, op int) []int {
	counts := make([]int, n)
	for d := range counts {
		counts[d] = size/8*(d+1)/n + d
	}
	if op%2 == 0 {
		counts[n-1] = 0
	}
	return counts
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// offsetsOf is where each block of counts starts, in elements.
func offsetsOf(counts []int) []int {
	offs := make([]int, len(counts))
	for d := 1; d < len(counts); d++ {
		offs[d] = offs[d-1] + counts[d-1]
	}
	return offs
}

// TestStageCopyMismatch: a broadcast or all-to-all beside a peer that runs
// another collective at the same sequence number fails with a
// *core.MismatchError naming the peer, on the root of a broadcast as well,
// instead of a wait or a silent success.
func TestStageCopyMismatch(t *testing.T) {
	size := 2 * stageCopyChunk
	bcast := func(root int) func(ctx context.Context, b *Board) error {
		return func(ctx context.Context, b *Board) error {
			return b.Broadcast(ctx, 1, boardTestSig(size), root, make([]byte, size))
		}
	}
	alltoall := func(ctx context.Context, b *Board) error {
		return b.AllToAll(ctx, 1, boardTestSig(2*size), make([]byte, 2*size), make([]byte, 2*size))
	}
	allreduce := func(ctx context.Context, b *Board) error {
		return b.AllReduce(ctx, 1, boardTestSig(size/2), make([]byte, size/2), make([]byte, size/2), 8, plainSum)
	}
	cases := []struct {
		name        string
		mine, other func(ctx context.Context, b *Board) error
	}{
		{"broadcast root beside an all-reduce", bcast(0), allreduce},
		{"broadcast beside an all-reduce", bcast(1), allreduce},
		{"broadcast beside an all-to-all", bcast(0), alltoall},
		{"all-to-all beside an all-reduce", alltoall, allreduce},
		{"all-gather beside a reduce-scatter", func(ctx context.Context, b *Board) error {
			return b.AllGather(ctx, 1, boardTestSig(size), make([]byte, size), make([]byte, 2*size))
		}, func(ctx context.Context, b *Board) error {
			return b.ReduceScatter(ctx, 1, boardTestSig(size/2), make([]byte, size), make([]byte, size/2), 8, plainSum)
		}},
		{"broadcast beside another size", bcast(0), func(ctx context.Context, b *Board) error {
			return b.Broadcast(ctx, 1, boardTestSig(size/2), 0, make([]byte, size/2))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err, other := beside(t, c.mine, c.other)
			var me *core.MismatchError
			if !errors.As(err, &me) || me.Peer != 1 {
				t.Fatalf("rank 0: %v, want a mismatch naming rank 1", err)
			}
			if !errors.As(other, &me) || me.Peer != 0 {
				t.Fatalf("rank 1: %v, want a mismatch naming rank 0", other)
			}
		})
	}
}

// beside runs mine on rank 0 of a new 2-rank world and other on rank 1,
// and returns their errors; it fails the test if they took the whole of
// the 30 s they are given.
func beside(t *testing.T, mine, other func(ctx context.Context, b *Board) error) (error, error) {
	t.Helper()
	ws := shmWorld(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	otherErr := make(chan error, 1)
	go func() { otherErr <- other(ctx, ws[1].Board()) }()
	err := mine(ctx, ws[0].Board())
	err1 := <-otherErr
	if ctx.Err() != nil {
		t.Fatalf("the collectives took the context's whole time: %v; %v", err, err1)
	}
	return err, err1
}
