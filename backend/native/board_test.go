package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/shmcoll"
	"github.com/gocomm/comm/rendezvous"
)

// openWorld opens n native ranks in this process, all on one host over
// shared memory (hosts 1) or split over two (hosts 2, even and odd ranks).
func openWorld(t *testing.T, n, hosts int, cfg backend.Config) []*Comm {
	t.Helper()
	store := rendezvous.NewMemStore()
	ws := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c := cfg
			c.Rank, c.Size, c.Store = r, n, store
			c.Transport = backend.TransportConfig{Mode: core.TransportAuto, HostID: fmt.Sprintf("host%d", r%hosts)}
			if c.Timeout == 0 {
				c.Timeout = time.Minute
			}
			be, err := Driver{}.Open(context.Background(), c)
			if err == nil {
				ws[r] = be.(*Comm)
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range ws {
			wg.Go(func() { c.Close() })
		}
		wg.Wait()
	})
	return ws
}

// runAll runs one request per rank at once and returns their errors.
func runAll(ws []*Comm, req func(r int) *backend.Request) ([]*backend.Request, []error) {
	reqs := make([]*backend.Request, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for r, c := range ws {
		reqs[r] = req(r)
		wg.Go(func() { errs[r] = c.Run(context.Background(), reqs[r]) })
	}
	wg.Wait()
	return reqs, errs
}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestBoardCollectives: on a world on one host, small all-reduces
// (every op, Avg too, in place or not), reduces to every root, broadcasts,
// all-gathers and barriers run on the board, with the results of the
// schedules, up to each kind's limit (the largest with the cache-bypassing
// copy); larger all-reduces run on its stage, exact too; forced
// algorithms, other kinds above their limits and worlds over two hosts
// use neither.
func TestBoardCollectives(t *testing.T) {
	for _, n := range []int{2, 3} {
		ws := openWorld(t, n, 1, backend.Config{})
		seq := uint64(0)
		run := func(name string, want algo.Algorithm, check func(r int, req *backend.Request), mk func(r int) *backend.Request) {
			t.Helper()
			seq++
			reqs, errs := runAll(ws, func(r int) *backend.Request {
				req := mk(r)
				req.Seq = seq
				return req
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("%d ranks, %s: rank %d: %v", n, name, r, err)
				}
				if reqs[r].Used != want {
					t.Errorf("%d ranks, %s: rank %d used %v, want %v", n, name, r, reqs[r].Used, want)
				}
				check(r, reqs[r])
			}
		}
		for _, op := range []core.Op{core.Sum, core.Max, core.Avg} {
			for _, inPlace := range []bool{false, true} {
				run(fmt.Sprintf("all-reduce %v in place %v", op, inPlace), algo.SharedBoard, func(r int, req *backend.Request) {
					want := map[core.Op][]float32{
						core.Sum: {float32(n * (n - 1) / 2), float32(2 * n)},
						core.Max: {float32(n - 1), 2},
						core.Avg: {float32(n-1) / 2, 2},
					}[op]
					if got := req.Recv; string(got) != string(f32s(want...)) {
						t.Errorf("%d ranks, all-reduce %v: rank %d got %v, want %v", n, op, r, got, f32s(want...))
					}
				}, func(r int) *backend.Request {
					send := f32s(float32(r), 2)
					recv := send
					if !inPlace {
						recv = make([]byte, len(send))
					}
					return &backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Op: op, Send: send, Recv: recv, SigCount: 2, Root: 0}
				})
			}
		}
		for root := range n {
			for _, op := range []core.Op{core.Sum, core.Avg} {
				run(fmt.Sprintf("reduce %v to %d", op, root), algo.SharedBoard, func(r int, req *backend.Request) {
					want := f32s(float32(n*(n-1)/2), float32(2*n))
					if op == core.Avg {
						want = f32s(float32(n-1)/2, 2)
					}
					if r == root && string(req.Recv) != string(want) {
						t.Errorf("%d ranks, reduce %v to %d: root got %v, want %v", n, op, root, req.Recv, want)
					}
					if r != root && req.Recv != nil {
						t.Errorf("%d ranks, reduce to %d: rank %d's nil recv became %v", n, root, r, req.Recv)
					}
				}, func(r int) *backend.Request {
					var recv []byte
					if r == root {
						recv = make([]byte, 8)
					}
					return &backend.Request{Kind: core.KindReduce, DType: core.Float32, Op: op, Root: root, Send: f32s(float32(r), 2), Recv: recv, SigCount: 2}
				})
			}
			run(fmt.Sprintf("broadcast from %d", root), algo.SharedBoard, func(r int, req *backend.Request) {
				if string(req.Recv) != string(f32s(7, float32(root))) {
					t.Errorf("%d ranks, broadcast from %d: rank %d got %v", n, root, r, req.Recv)
				}
			}, func(r int) *backend.Request {
				recv := make([]byte, 8)
				if r == root {
					recv = f32s(7, float32(root))
				}
				return &backend.Request{Kind: core.KindBroadcast, DType: core.Float32, Root: root, Recv: recv, SigCount: 2}
			})
		}
		run("all-gather", algo.SharedBoard, func(r int, req *backend.Request) {
			var want []float32
			for q := range n {
				want = append(want, float32(q), -1)
			}
			if string(req.Recv) != string(f32s(want...)) {
				t.Errorf("%d ranks, all-gather: rank %d got %v", n, r, req.Recv)
			}
		}, func(r int) *backend.Request {
			return &backend.Request{Kind: core.KindAllGather, DType: core.Float32, Send: f32s(float32(r), -1),
				Recv: make([]byte, 8*n), Counts: evenCounts(n, 2), SigCount: 2}
		})
		// The largest contributions each kind puts on the board (written
		// with the cache-bypassing copy), and one element more.
		at := func(limit, r, i int) float32 { return float32(r*limit + i) }
		lim := boardAllReduceMax / 4
		run("all-reduce at the board's limit", algo.SharedBoard, func(r int, req *backend.Request) {
			for i := range lim {
				want := float32(0)
				for q := range n {
					want += at(lim, q, i)
				}
				if got := math.Float32frombits(binary.LittleEndian.Uint32(req.Recv[4*i:])); got != want {
					t.Fatalf("%d ranks, all-reduce of %d: rank %d's element %d is %v, want %v", n, lim, r, i, got, want)
				}
			}
		}, func(r int) *backend.Request {
			send := make([]byte, 4*lim)
			for i := range lim {
				binary.LittleEndian.PutUint32(send[4*i:], math.Float32bits(at(lim, r, i)))
			}
			return &backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Op: core.Sum, Send: send, Recv: make([]byte, len(send)), SigCount: lim}
		})
		gl := boardAllGatherMax / 4
		run("all-gather at the board's limit", algo.SharedBoard, func(r int, req *backend.Request) {
			for q := range n {
				for i := range gl {
					if got := math.Float32frombits(binary.LittleEndian.Uint32(req.Recv[4*(q*gl+i):])); got != at(gl, q, i) {
						t.Fatalf("%d ranks, all-gather of %d: rank %d's element %d of rank %d is %v, want %v", n, gl, r, i, q, got, at(gl, q, i))
					}
				}
			}
		}, func(r int) *backend.Request {
			send := make([]byte, 4*gl)
			for i := range gl {
				binary.LittleEndian.PutUint32(send[4*i:], math.Float32bits(at(gl, r, i)))
			}
			return &backend.Request{Kind: core.KindAllGather, DType: core.Float32, Send: send, Recv: make([]byte, 4*gl*n), Counts: evenCounts(n, gl), SigCount: gl}
		})
		for _, c := range []struct {
			count int
			want  algo.Algorithm
		}{{boardReduceMax / 4, algo.SharedBoard}, {boardReduceMax/4 + 1, algo.Tree}} {
			run(fmt.Sprintf("reduce of %d", c.count), c.want, func(r int, req *backend.Request) {
				if r != 0 {
					return
				}
				for i := range c.count {
					if got := math.Float32frombits(binary.LittleEndian.Uint32(req.Recv[4*i:])); got != float32(n*i) {
						t.Fatalf("%d ranks, reduce of %d: root's element %d is %v, want %v", n, c.count, i, got, n*i)
					}
				}
			}, func(r int) *backend.Request {
				send := make([]byte, 4*c.count)
				for i := range c.count {
					binary.LittleEndian.PutUint32(send[4*i:], math.Float32bits(float32(i)))
				}
				var recv []byte
				if r == 0 {
					recv = make([]byte, len(send))
				}
				return &backend.Request{Kind: core.KindReduce, DType: core.Float32, Op: core.Sum, Send: send, Recv: recv, SigCount: c.count}
			})
		}
		run("barrier", algo.SharedBoard, func(int, *backend.Request) {}, func(int) *backend.Request {
			return &backend.Request{Kind: core.KindBarrier}
		})
		run("forced tree", algo.Tree, func(int, *backend.Request) {}, func(r int) *backend.Request {
			b := f32s(1)
			return &backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Op: core.Sum, Send: b, Recv: b, SigCount: 1, Algorithm: algo.Tree}
		})
		// Above the board: all-reduces on its stage (sizes around its
		// all-read size and its chunk, and one whose result is written
		// around the cache), the other kinds on schedules.
		for _, count := range []int{boardAllReduceMax/4 + 1, 3000, shmcoll.StageChunk/4*2 + 5, shmcoll.StageAroundMin/4 + 5} {
			for _, op := range []core.Op{core.Sum, core.Max, core.Avg} {
				for _, inPlace := range []bool{false, true} {
					run(fmt.Sprintf("all-reduce %v of %d in place %v", op, count, inPlace), algo.SharedStage, func(r int, req *backend.Request) {
						var wants [7]float32
						for k := range wants {
							wants[k] = map[core.Op]float32{
								core.Sum: float32(n*(n-1)/2 + n*k),
								core.Max: float32(n - 1 + k),
								core.Avg: float32(n-1)/2 + float32(k),
							}[op]
						}
						for i := range count {
							want := wants[i%7]
							if got := math.Float32frombits(binary.LittleEndian.Uint32(req.Recv[4*i:])); got != want {
								t.Fatalf("%d ranks, all-reduce %v of %d: rank %d's element %d is %v, want %v", n, op, count, r, i, got, want)
							}
						}
					}, func(r int) *backend.Request {
						send := make([]byte, 4*count)
						for i := range count {
							binary.LittleEndian.PutUint32(send[4*i:], math.Float32bits(float32(r+i%7)))
						}
						recv := send
						if !inPlace {
							recv = make([]byte, len(send))
						}
						return &backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Op: op, Send: send, Recv: recv, SigCount: count}
					})
				}
			}
		}
		big := boardAllReduceMax/4 + 1
		run("all-reduce above the board, forced ring", algo.Ring, func(int, *backend.Request) {}, func(r int) *backend.Request {
			b := make([]byte, 4*big)
			return &backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Op: core.Sum, Send: b, Recv: b, SigCount: big, Algorithm: algo.Ring}
		})
		big = boardBroadcastMax/4 + 1
		run("broadcast above the board", algo.Tree, func(int, *backend.Request) {}, func(r int) *backend.Request {
			return &backend.Request{Kind: core.KindBroadcast, DType: core.Float32, Recv: make([]byte, 4*big), SigCount: big}
		})
	}
	ws := openWorld(t, 4, 2, backend.Config{})
	_, errs := runAll(ws, func(r int) *backend.Request {
		b := f32s(1)
		return &backend.Request{Kind: core.KindAllReduce, Seq: 1, DType: core.Float32, Op: core.Sum, Send: b, Recv: b, SigCount: 1}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("two hosts: rank %d: %v", r, err)
		}
	}
	for _, c := range ws {
		if c.board != nil {
			t.Fatalf("two hosts: rank %d has a board", c.rank)
		}
	}
}

func evenCounts(n, each int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = each
	}
	return c
}

// TestBoardMismatchedSizes: ranks that disagree on an all-reduce's length
// so that one runs it on the board and the other on a schedule fail with
// a mismatch naming each other at once, not at the timeout.
func TestBoardMismatchedSizes(t *testing.T) {
	ws := openWorld(t, 2, 1, backend.Config{Timeout: time.Minute})
	start := time.Now()
	_, errs := runAll(ws, func(r int) *backend.Request {
		n := 2
		if r == 1 {
			n = 4096
		}
		b := make([]byte, 4*n)
		return &backend.Request{Kind: core.KindAllReduce, Seq: 1, DType: core.Float32, Op: core.Sum, Send: b, Recv: b, SigCount: n}
	})
	var me *core.MismatchError
	if !errors.As(errs[0], &me) || me.Peer != 1 {
		t.Fatalf("rank 0 (board): %v, want a mismatch with rank 1", errs[0])
	}
	if errs[1] == nil {
		t.Fatal("rank 1 (schedule) succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the mismatch took %v", d)
	}
}

// TestBoardTurn: collectives started out of sequence order (Start forms on
// several goroutines) run in order on the board, with the right results;
// board and schedule collectives interleave.
func TestBoardTurn(t *testing.T) {
	ws := openWorld(t, 2, 1, backend.Config{})
	const ops = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*ops)
	for r, c := range ws {
		for i := range ops {
			seq := uint64(i + 1)
			if r == 1 {
				seq = ops - uint64(i) // rank 1 starts them backwards
			}
			wg.Go(func() {
				n := 2
				if seq%5 == 0 {
					n = 1024 // a schedule
				}
				send := make([]byte, 4*n)
				for k := range n {
					binary.LittleEndian.PutUint32(send[4*k:], math.Float32bits(float32(seq)))
				}
				recv := make([]byte, len(send))
				req := &backend.Request{Kind: core.KindAllReduce, Seq: seq, DType: core.Float32, Op: core.Sum, Send: send, Recv: recv, SigCount: n}
				if err := c.Run(context.Background(), req); err != nil {
					errs <- fmt.Errorf("rank %d seq %d: %v", r, seq, err)
					return
				}
				if got := math.Float32frombits(binary.LittleEndian.Uint32(recv)); got != float32(2*seq) {
					errs <- fmt.Errorf("rank %d seq %d: got %v, want %v", r, seq, got, 2*seq)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSettleTime: ranks that share a process (a test's world) do not
// settle after set-up (the 20 ms is for a rank alone in its process whose
// waits sleep holding its one P; transport's TestSHMProcesses checks
// SleepsHoldingP for those).
func TestSettleTime(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, c := range openWorld(t, 2, 1, backend.Config{}) {
		if d := c.SettleTime(); d != 0 {
			t.Errorf("rank %d of a world in one process settles %v", c.rank, d)
		}
	}
}
