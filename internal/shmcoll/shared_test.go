package shmcoll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gocomm/comm/core"
)

// sharedAgree is MapShared's agree over the board, numbering its
// exchanges from *seq.
func sharedAgree(t testing.TB, b *Board, seq *uint64) func(ok bool) error {
	return func(ok bool) error {
		*seq++
		var flag [8]byte
		if ok {
			flag[0] = 1
		}
		all := true
		err := b.Exchange(tctx(t), *seq, boardTestSig(1), flag[:], 8, -1, func(_ int, p []byte) { all = all && p[0] == 1 })
		if err == nil && !all {
			err = fmt.Errorf("a rank could not")
		}
		return err
	}
}

// sharedFiles lists the shared allocations' files left in the segment's
// directory.
func sharedFiles(t *testing.T, b *Board) []string {
	dir, name := b.sharedPath(0, 0)
	prefix, _, _ := strings.Cut(name, ".a")
	m, err := filepath.Glob(filepath.Join(dir, prefix+".a*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSharedAllReduce: all-reduces of buffers in shared allocations, on
// 2, 3 and 5 ranks, in place and not, at sizes around the stripes'
// cuts and the fold's pieces, each followed by a board exchange: every
// rank ends with the exact sum, folded in rank order. When one rank's
// recv is not shared, every rank is told to run it elsewhere. From
// StageAroundMin, 2 ranks fold straight into both results (the fold is
// asked for the peer's as a second output), more ranks as below it.
// Nothing is left on disk, and freeing unmaps.
func TestSharedAllReduce(t *testing.T) {
	sizes := []int{8, 64, 4096 + 8, sharedPiece - 8, sharedPiece + 8, 3*sharedPiece + 4000, 300000, StageAroundMin + 4000}
	const alloc = StageAroundMin + 1<<20
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ws := shmWorld(t, n)
			errs := make(chan error, 100*n)
			var wg sync.WaitGroup
			for r, w := range ws {
				wg.Go(func() {
					b := w.Board()
					var seq uint64
					a, err := b.MapShared(1, alloc, sharedAgree(t, b, &seq))
					if err != nil {
						errs <- fmt.Errorf("rank %d: MapShared: %v", r, err)
						return
					}
					c, err := b.MapShared(2, alloc, sharedAgree(t, b, &seq))
					if err != nil {
						errs <- fmt.Errorf("rank %d: MapShared: %v", r, err)
						return
					}
					for i, v := range a {
						if v != 0 || c[i] != 0 {
							errs <- fmt.Errorf("rank %d: fresh shared memory is not zero at %d", r, i)
							return
						}
					}
					for op := range 3 * len(sizes) {
						size := sizes[op%len(sizes)]
						// Rank r's send sits at its own offset: ranks need not
						// agree on where their buffers are.
						off := 64 * (r + op%3)
						send := a[off : off+size]
						for i := 0; i < size; i += 8 {
							binary.LittleEndian.PutUint64(send[i:], stageWord(op, r, i/8))
						}
						recv := send // in place
						shared := true
						switch op % 3 {
						case 1:
							recv = c[alloc-size-8*r : alloc-8*r]
						case 2:
							if r == n-1 && op%2 == 0 {
								recv, shared = make([]byte, size), false
							} else {
								recv = c[:size]
							}
						}
						outs := 0
						fold := func(dst, out []byte, srcs [][]byte) error {
							if out != nil {
								outs++
							}
							lo := 0
							if p := srcs[(r+1)%n]; len(p) >= 8 {
								lo = int(binary.LittleEndian.Uint64(p)&0xffffffff) * 8
							}
							return sumWords(op, lo)(dst, out, srcs)
						}
						seq++
						ran, err := b.AllReduceShared(tctx(t), seq, boardTestSig(size), send, recv, 8, fold)
						if err != nil {
							errs <- fmt.Errorf("rank %d op %d (%d bytes): %v", r, op, size, err)
							return
						}
						allShared := op%3 != 2 || op%2 != 0
						if ran != allShared {
							errs <- fmt.Errorf("rank %d op %d: ran %v, want %v (this rank's recv shared: %v)", r, op, ran, allShared, shared)
							return
						}
						if !ran {
							if err := b.AllReduce(tctx(t), seq, boardTestSig(size), send, recv, 8, fold); err != nil {
								errs <- fmt.Errorf("rank %d op %d: stage: %v", r, op, err)
								return
							}
						}
						if err := checkStageSums(recv, op, n); err != nil {
							errs <- fmt.Errorf("rank %d op %d (%d bytes, case %d): %v", r, op, size, op%3, err)
							return
						}
						if wantOut := size >= StageAroundMin && (n == 2 || !ran); (outs > 0) != wantOut {
							errs <- fmt.Errorf("rank %d op %d (%d bytes, shared %v): %d folds with a second output, want some: %v", r, op, size, ran, outs, wantOut)
							return
						}
						seq++
						if err := b.Exchange(tctx(t), seq, boardTestSig(1), make([]byte, 8), 8, -1, func(int, []byte) {}); err != nil {
							errs <- fmt.Errorf("rank %d op %d (board): %v", r, op, err)
							return
						}
					}
					// Every rank has returned from MapShared by now.
					if got := sharedFiles(t, b); len(got) != 0 {
						errs <- fmt.Errorf("rank %d: files left after mapping: %v", r, got)
					}
					if !b.IsShared(a[100:200]) || b.IsShared(make([]byte, 8)) {
						errs <- fmt.Errorf("rank %d: IsShared wrong", r)
					}
					for _, m := range [][]byte{a, c} {
						if err := b.UnmapShared(m); err != nil {
							errs <- fmt.Errorf("rank %d: UnmapShared: %v", r, err)
						}
					}
					if b.IsShared(a) || len(b.shared) != 0 {
						errs <- fmt.Errorf("rank %d: still shared after UnmapShared", r)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestSharedAllocFails: a rank that cannot create its file fails
// MapShared on every rank, with nothing left mapped or on disk.
func TestSharedAllocFails(t *testing.T) {
	ws := shmWorld(t, 3)
	// Rank 1's file exists already: its O_EXCL create fails.
	dir, name := ws[1].Board().sharedPath(7, 1)
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join(dir, name))
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, w := range ws {
		wg.Go(func() {
			var seq uint64
			_, errs[r] = w.Board().MapShared(7, 4096, sharedAgree(t, w.Board(), &seq))
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: MapShared succeeded", r)
		}
		if r == 1 && !strings.Contains(err.Error(), "could not create") {
			t.Errorf("rank 1: %v, want why it could not create its file", err)
		}
		if len(ws[r].Board().shared) != 0 {
			t.Errorf("rank %d: an allocation is live", r)
		}
	}
	if got := sharedFiles(t, ws[0].Board()); len(got) != 1 {
		t.Errorf("files left: %v, want only the test's own", got)
	}
}

// FuzzSharedDesc feeds AllReduceShared's decoder and fold what a broken or
// hostile peer could post as its descriptor: any bytes. Decoding either
// fails or round-trips; a decoded descriptor naming allocations, offsets
// or lengths this rank does not have fails the fold with an error naming
// the peer, never a panic or a write outside the allocations.
func FuzzSharedDesc(f *testing.F) {
	var valid [sharedDescBytes]byte
	sharedDesc{ok: true, sendID: 1, sendOff: 64, recvID: 1, recvOff: 4096}.put(valid[:])
	f.Add(valid[:])
	f.Add([]byte{})
	f.Add(make([]byte, sharedDescBytes))
	huge := valid
	huge[23] = 0x80 // sendOff beyond any allocation
	f.Add(huge[:])
	other := valid
	other[8] = 9 // an allocation nobody made
	f.Add(other[:])

	ws := shmWorld(f, 2)
	const size = 1 << 16
	mems, errs := mapEveryRank(f, ws, 1, size)
	for r, err := range errs {
		if err != nil {
			f.Fatalf("rank %d: MapShared: %v", r, err)
		}
	}
	b := ws[0].Board()
	send, recv := mems[0][:4096], mems[0][8192:8192+4096]
	fold := func(dst, out []byte, srcs [][]byte) error {
		for i := range dst {
			dst[i] = srcs[0][i] + srcs[1][i]
		}
		return nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := getSharedDesc(data)
		if err != nil {
			return
		}
		var again [sharedDescBytes]byte
		d.put(again[:])
		if string(again[:]) != string(data) {
			t.Fatalf("%x decoded to %+v, which encodes as %x", data, d, again)
		}
		mine := sharedDesc{ok: true, sendID: 1, sendOff: 0, recvID: 1, recvOff: 8192}
		if err := b.foldShared([]sharedDesc{mine, d}, send, recv, fold); err != nil {
			var pe *core.PeerError
			if !errors.As(err, &pe) || pe.Peer != 1 {
				t.Fatalf("descriptor %+v: %v, want a *core.PeerError naming rank 1", d, err)
			}
		}
	})
}

// mapEveryRank runs MapShared(id, size) on every rank of ws at once and
// returns each rank's memory and error. Each call agrees over the board,
// with sequence numbers of its own.
func mapEveryRank(tb testing.TB, ws []*testRank, id uint64, size int) ([][]byte, []error) {
	mems := make([][]byte, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for r, w := range ws {
		wg.Go(func() {
			b := w.Board()
			seq := 1000 * id // distinct from other calls' exchanges
			mems[r], errs[r] = b.MapShared(id, size, sharedAgree(tb, b, &seq))
		})
	}
	wg.Wait()
	return mems, errs
}
