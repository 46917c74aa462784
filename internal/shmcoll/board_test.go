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
	"github.com/gocomm/comm/internal/transport"
)

// boardSig is the signature the board tests post.
func boardTestSig(count int) core.Signature {
	return core.Signature{Kind: core.KindAllReduce, DType: core.Int64, Op: core.Sum, Count: uint64(count)}
}

// TestBoardExchange runs many exchanges of every size up to BoardBytes on
// 2-4 ranks, each rank reading all contributions (and, every third
// operation, only one rank's): every rank sees every other's value of
// that operation, in rank order, so no slot is reused early.
func TestBoardExchange(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ws := shmWorld(t, n)
			for _, w := range ws {
				if w.Board() == nil {
					t.Fatalf("rank %d: no board on a one-host world", w.Rank())
				}
			}
			const ops = 3000
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for r, w := range ws {
				wg.Go(func() {
					b := w.Board()
					for op := range ops {
						length := 8 * (1 + op%(BoardBytes/8))
						mine := make([]byte, length)
						for i := 0; i < length; i += 8 {
							binary.LittleEndian.PutUint64(mine[i:], uint64(op*1000+r*10+i))
						}
						from := -1
						if op%3 == 2 {
							from = op % n
						}
						next := 0
						err := b.Exchange(tctx(t), uint64(op+1), boardTestSig(length), mine, len(mine), from, func(q int, p []byte) {
							if from < 0 && q != next {
								errs <- fmt.Errorf("rank %d op %d: read rank %d, want %d (rank order)", r, op, q, next)
							}
							next = q + 1
							for i := 0; i < length; i += 8 {
								if got, want := binary.LittleEndian.Uint64(p[i:]), uint64(op*1000+q*10+i); got != want {
									errs <- fmt.Errorf("rank %d op %d: rank %d's word %d is %d, want %d", r, op, q, i/8, got, want)
									return
								}
							}
						})
						if err != nil {
							errs <- fmt.Errorf("rank %d op %d: %v", r, op, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

// TestBoardMismatch: a peer that posts another signature, or runs the
// same sequence number outside the board (Enter), fails the exchange with
// a *core.MismatchError naming it, instead of a wait.
func TestBoardMismatch(t *testing.T) {
	t.Run("signature", testBoardMismatchSig)
	t.Run("outside", testBoardMismatchOutside)
}

func testBoardMismatchSig(t *testing.T) {
	ws := shmWorld(t, 2)
	ctx := tctx(t)
	res := make(chan error, 1)
	go func() {
		res <- ws[1].Board().Exchange(ctx, 1, boardTestSig(2), make([]byte, 16), 16, -1, func(int, []byte) {})
	}()
	err := ws[0].Board().Exchange(ctx, 1, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {})
	var me *core.MismatchError
	if !errors.As(err, &me) || me.Peer != 1 || me.Remote.Count != 2 || me.Local.Count != 1 {
		t.Fatalf("rank 0: %v, want a mismatch with rank 1's count 2", err)
	}
	if err := <-res; !errors.As(err, &me) || me.Peer != 0 {
		t.Fatalf("rank 1: %v, want a mismatch with rank 0", err)
	}
}

func testBoardMismatchOutside(t *testing.T) {
	ws := shmWorld(t, 2)
	ctx := tctx(t)
	var me *core.MismatchError
	go func() {
		ws[1].Board().Enter(1, core.Signature{Kind: core.KindAllReduce, DType: core.Int64, Op: core.Sum, Algo: 1, Count: 4096})
	}()
	start := time.Now()
	err := ws[0].Board().Exchange(ctx, 1, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {})
	if !errors.As(err, &me) || me.Peer != 1 || me.Remote.Count != 4096 {
		t.Fatalf("rank 0 beside a rank outside the board: %v, want a mismatch naming rank 1's count 4096", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the mismatch took %v to find", d)
	}
}

// TestBoardWaitEnds: a board wait for a peer that never comes ends with
// ctx, and with the endpoint's failure (an abort), and says whom it
// waited for.
func TestBoardWaitEnds(t *testing.T) {
	t.Run("ctx", testBoardWaitCtx)
	t.Run("abort", testBoardWaitAbort)
}

func testBoardWaitCtx(t *testing.T) {
	ws := shmWorld(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Rank 1 takes part, rank 2 never does.
	go ws[1].Board().Exchange(tctx(t), 1, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {})
	err := ws[0].Board().Exchange(ctx, 1, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {})
	var pe *core.PeerError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe.Peer != 2 {
		t.Fatalf("got %v, want the deadline, waiting for rank 2", err)
	}
}

func testBoardWaitAbort(t *testing.T) {
	ws := shmWorld(t, 2)
	done := make(chan error, 1)
	go func() {
		done <- ws[0].Board().Exchange(tctx(t), 1, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {})
	}()
	time.Sleep(50 * time.Millisecond) // into the wait's sleep
	cause := errors.New("test abort")
	ws[0].Abort(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) {
			t.Fatalf("after Abort: %v, want the abort's cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an aborted board wait did not end")
	}
}

// TestBoardNoneAcrossHosts: a world whose ranks are not all on one host
// has no board (its collectives would not see each other's slots).
func TestBoardNoneAcrossHosts(t *testing.T) {
	requireSHM(t)
	ws, err := connectHybridWorld(4, func(o *transport.HybridOptions) {
		o.Prefix = t.Name()
		o.HostID = fmt.Sprintf("host%d", o.Rank%2)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	for _, w := range ws {
		if !w.SharedMemory((w.Rank() + 2) % 4) {
			t.Fatalf("rank %d: no shared memory with its host's other rank", w.Rank())
		}
		if w.Board() != nil {
			t.Fatalf("rank %d: a board on a world of two hosts", w.Rank())
		}
	}
}

// BenchmarkBoardExchange is the board's floor for a 2-rank 8-byte
// all-reduce: two goroutines exchanging 8 bytes on the board and adding,
// without the comm package's request, flight record, op context and
// turn. commbench's figure minus this one is what the layers above cost.
func BenchmarkBoardExchange(b *testing.B) {
	ws := shmWorld(b, 2)
	ctx := context.Background()
	var wg sync.WaitGroup
	b.ResetTimer()
	for r, w := range ws {
		wg.Go(func() {
			brd := w.Board()
			mine, sum := make([]byte, 8), uint64(0)
			for i := range b.N {
				binary.LittleEndian.PutUint64(mine, uint64(r+i))
				err := brd.Exchange(ctx, uint64(i+1), boardTestSig(1), mine, len(mine), -1, func(_ int, p []byte) {
					sum += binary.LittleEndian.Uint64(p)
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
