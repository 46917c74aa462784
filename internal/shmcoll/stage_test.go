package shmcoll

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/core"
)

// sumWords is a Fold over little-endian uint64 words that also checks
// that srcs come one per rank, in rank order (word i of rank q's
// contribution to operation op is stageWord(op, q, i)), and that dst
// overlaps none of them.
func sumWords(op int, lo int) Fold {
	return func(dst, out []byte, srcs [][]byte) error {
		for q, src := range srcs {
			if len(src) != len(dst) {
				return fmt.Errorf("op %d: rank %d's source has %d bytes, dst %d", op, q, len(src), len(dst))
			}
			if len(src) >= 8 {
				if got, want := binary.LittleEndian.Uint64(src), stageWord(op, q, lo/8); got != want {
					return fmt.Errorf("op %d: source %d starts with %d, want rank %d's word %d (%d)", op, q, got, q, lo/8, want)
				}
			}
		}
		// dst must not overlap a source: scribble on it first, as a
		// kernel that copies one source in and folds the rest would.
		for i := range dst {
			dst[i] = 0xa5
		}
		return plainSum(dst, out, srcs)
	}
}

// plainSum folds little-endian uint64 words into dst, and out if not nil.
func plainSum(dst, out []byte, srcs [][]byte) error {
	if out != nil && len(out) != len(dst) {
		return fmt.Errorf("fold into %d bytes and %d", len(dst), len(out))
	}
	for i := 0; i < len(dst); i += 8 {
		var s uint64
		for _, src := range srcs {
			s += binary.LittleEndian.Uint64(src[i:])
		}
		binary.LittleEndian.PutUint64(dst[i:], s)
	}
	copy(out, dst)
	return nil
}

func stageWord(op, rank, i int) uint64 { return uint64(op)<<40 | uint64(rank)<<32 | uint64(i) }

// checkStageSums checks that every word of recv is the sum of word i of
// the n ranks' contributions to operation op.
func checkStageSums(recv []byte, op, n int) error {
	for i := 0; i < len(recv); i += 8 {
		var want uint64
		for q := range n {
			want += stageWord(op, q, i/8)
		}
		if got := binary.LittleEndian.Uint64(recv[i:]); got != want {
			return fmt.Errorf("word %d is %#x, want %#x", i/8, got, want)
		}
	}
	return nil
}

// TestStageAllReduce runs all-reduces of sizes around every boundary of
// the stage (the board's size, stripes that are not whole lines, one
// chunk, several, the size from which results are written around the
// cache) on 2-5 ranks, in place or not, interleaved with board exchanges:
// every result is the exact sum, on every rank, and the fold is asked for
// a second output (the stripe) exactly from StageAroundMin on.
func TestStageAllReduce(t *testing.T) {
	sizes := []int{BoardBytes + 8, 4096, 8200, 40000, StageChunk - 8, StageChunk, StageChunk + 8, 3*StageChunk + 1000,
		StageAroundMin - 8, StageAroundMin + StageChunk/2 + 8}
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ops := 4 * len(sizes)
			onEveryBoard(t, shmWorld(t, n), func(r int, b *Board) error {
				for op := range ops {
					seq := uint64(2*op + 1)
					// A board exchange between stage operations.
					if err := b.Exchange(tctx(t), seq, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {}); err != nil {
						return fmt.Errorf("op %d (board): %v", op, err)
					}
					size := sizes[op%len(sizes)]
					send := make([]byte, size)
					for i := 0; i < size; i += 8 {
						binary.LittleEndian.PutUint64(send[i:], stageWord(op, r, i/8))
					}
					recv := send
					if op%2 == 1 {
						recv = make([]byte, size)
					}
					// The fold checks the first word of each source against
					// the stripe's start: find it from the chunk's bytes.
					fold := func(dst, out []byte, srcs [][]byte) error {
						if (out != nil) != (size >= StageAroundMin) {
							return fmt.Errorf("a fold of a %d-byte all-reduce with a second output: %v", size, out != nil)
						}
						lo := 0
						for q, src := range srcs {
							if q != r && len(src) >= 8 {
								lo = int(binary.LittleEndian.Uint64(src)&0xffffffff) * 8
								break
							}
						}
						return sumWords(op, lo)(dst, out, srcs)
					}
					if err := b.AllReduce(tctx(t), seq+1, boardTestSig(size), send, recv, 8, fold); err != nil {
						return fmt.Errorf("op %d (%d bytes): %v", op, size, err)
					}
					if err := checkStageSums(recv, op, n); err != nil {
						return fmt.Errorf("op %d (%d bytes, in place %v): %v", op, size, op%2 == 0, err)
					}
				}
				return nil
			})
		})
	}
}

// onEveryBoard runs f on every rank's board of ws at once and fails the
// test with every rank's error.
func onEveryBoard(t *testing.T, ws []*testRank, f func(r int, b *Board) error) {
	t.Helper()
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for r, w := range ws {
		wg.Go(func() {
			if err := f(r, w.Board()); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestStageStripes: the stripes of a chunk cover it exactly, in order, cut
// at cache lines (so between elements of any size).
func TestStageStripes(t *testing.T) {
	for _, n := range []int{BoardBytes + 8, 4000, 40000, StageChunk} {
		for ranks := 2; ranks <= MaxBoardRanks; ranks++ {
			end := 0
			for r := range ranks {
				lo, hi := stripe(n, ranks, r)
				if lo != end || hi < lo || hi-lo > stageStripe || (hi != n && hi%cacheLine != 0) {
					t.Fatalf("%d bytes, %d ranks: rank %d's stripe [%d, %d) after %d", n, ranks, r, lo, hi, end)
				}
				end = hi
			}
			if end != n {
				t.Fatalf("%d bytes, %d ranks: stripes end at %d", n, ranks, end)
			}
		}
	}
}

// TestStageMismatch: a peer whose all-reduce has another size, or that
// runs the same sequence number on the board or elsewhere, fails the
// stage operation with a *core.MismatchError naming it instead of a wait.
func TestStageMismatch(t *testing.T) {
	big := 3 * StageChunk
	cases := []struct {
		name  string
		other func(ctx context.Context, b *Board) error
		count uint64 // the remote count the error names
	}{
		{"size", func(ctx context.Context, b *Board) error {
			return b.AllReduce(ctx, 1, boardTestSig(big/2), make([]byte, big/2), make([]byte, big/2), 8, sumWords(0, 0))
		}, uint64(big / 2)},
		{"board", func(ctx context.Context, b *Board) error {
			return b.Exchange(ctx, 1, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {})
		}, 1},
		{"elsewhere", func(ctx context.Context, b *Board) error {
			b.Enter(1, boardTestSig(7))
			return nil
		}, 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err, other := beside(t, func(ctx context.Context, b *Board) error {
				return b.AllReduce(ctx, 1, boardTestSig(big), make([]byte, big), make([]byte, big), 8, sumWords(0, 0))
			}, c.other)
			var me *core.MismatchError
			if !errors.As(err, &me) || me.Peer != 1 || me.Remote.Count != c.count {
				t.Fatalf("rank 0 beside a rank that ran %s: %v, want a mismatch naming rank 1's count %d", c.name, err, c.count)
			}
			// Rank 1 learns of it as well, but for the rank that left.
			if c.name != "elsewhere" && (!errors.As(other, &me) || me.Peer != 0) {
				t.Fatalf("rank 1, which ran %s: %v, want a mismatch naming rank 0", c.name, other)
			}
		})
	}
}

// TestStageWaitEnds: a stage collective's wait for a peer that never
// comes ends with the context, whichever step it waits in.
func TestStageWaitEnds(t *testing.T) {
	n := big()
	ops := map[string]func(ctx context.Context, b *Board) error{
		"all-reduce": func(ctx context.Context, b *Board) error {
			return b.AllReduce(ctx, 1, boardTestSig(n), make([]byte, n), make([]byte, n), 8, sumWords(0, 0))
		},
		// The root of a one-chunk broadcast waits for the copies.
		"broadcast root": func(ctx context.Context, b *Board) error {
			return b.Broadcast(ctx, 1, boardTestSig(8), 0, make([]byte, 8))
		},
		"broadcast": func(ctx context.Context, b *Board) error {
			return b.Broadcast(ctx, 1, boardTestSig(n), 1, make([]byte, n))
		},
		"broadcast chunks": func(ctx context.Context, b *Board) error {
			return b.Broadcast(ctx, 1, boardTestSig(3*n), 0, make([]byte, 3*n))
		},
		"all-to-all": func(ctx context.Context, b *Board) error {
			return b.AllToAll(ctx, 1, boardTestSig(n), make([]byte, n), make([]byte, n))
		},
		"all-gather": func(ctx context.Context, b *Board) error {
			return b.AllGather(ctx, 1, boardTestSig(n), make([]byte, n), make([]byte, 2*n))
		},
		"reduce-scatter": func(ctx context.Context, b *Board) error {
			return b.ReduceScatter(ctx, 1, boardTestSig(n), make([]byte, 2*n), make([]byte, n), 8, plainSum)
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			ws := shmWorld(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err := op(ctx, ws[0].Board())
			var pe *core.PeerError
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe.Peer != 1 {
				t.Fatalf("a wait for a rank that never came: %v, want the deadline, naming rank 1", err)
			}
		})
	}
}

func big() int { return 2 * StageChunk }
