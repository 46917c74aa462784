//go:build linux && !gocomm_portable

package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestSHMSingleCopy: messages of at least SingleCopyBytes are copied
// straight out of the sender's memory (counted by singleIn) and arrive
// whole, whether the receive is posted first, posted long after the send
// returned, or both ranks send before they receive; with single copy off
// at either end they go through the ring.
func TestSHMSingleCopy(t *testing.T) {
	const n = 1<<20 + 12345
	h := Header{Comm: 1, Seq: 1, Sig: sig(n)}
	check := func(t *testing.T, ws []*Hybrid, buf []byte, seed uint64, wantSingle int64) {
		t.Helper()
		if !bytes.Equal(buf, payload(seed, n)) {
			t.Fatal("message corrupted")
		}
		var got int64
		for _, e := range ws {
			got += e.shm.singleIn.Load()
		}
		if got != wantSingle {
			t.Fatalf("%d messages copied out of a peer's memory, want %d", got, wantSingle)
		}
	}

	t.Run("posted-first", func(t *testing.T) {
		ws := shmSingleWorld(t, 2)
		ctx := tctx(t)
		buf := make([]byte, n)
		ch := goRecv(ctx, ws[1], 0, h, buf)
		waitFor(t, "receive posted", func() bool { return !ws[1].mb.quietFor(0, &h) })
		if err := ws[0].Send(ctx, 1, h, payload(1, n)); err != nil {
			t.Fatal(err)
		}
		if r := waitResult(t, ch, 5*time.Second); r.err != nil {
			t.Fatal(r.err)
		}
		check(t, ws, buf, 1, 1)
	})

	t.Run("unexpected", func(t *testing.T) {
		// Nobody receives: after singlePatience the receiver's drainer
		// copies the message aside and the send completes.
		ws := shmSingleWorld(t, 2)
		ctx := tctx(t)
		start := time.Now()
		if err := ws[0].Send(ctx, 1, h, payload(2, n)); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < singlePatience/2 {
			t.Errorf("send returned after %v, before the receiver had reason to copy", el)
		}
		buf := make([]byte, n)
		if _, err := ws[1].Recv(ctx, 0, h, buf); err != nil {
			t.Fatal(err)
		}
		check(t, ws, buf, 2, 1)
	})

	t.Run("both-send-first", func(t *testing.T) {
		ws := shmSingleWorld(t, 2)
		ctx := tctx(t)
		bufs := [2][]byte{make([]byte, n), make([]byte, n)}
		bothRanks(t, func(r int) error {
			if err := ws[r].Send(ctx, 1-r, h, payload(uint64(10+r), n)); err != nil {
				return err
			}
			_, err := ws[r].Recv(ctx, 1-r, h, bufs[r])
			return err
		})
		if !bytes.Equal(bufs[0], payload(11, n)) || !bytes.Equal(bufs[1], payload(10, n)) {
			t.Fatal("messages corrupted")
		}
		check(t, ws, bufs[0], 11, 2)
	})

	for _, off := range []int{0, 1} {
		t.Run([]string{"off-at-sender", "off-at-receiver"}[off], func(t *testing.T) {
			ws, err := connectHybridWorld(2, func(o *HybridOptions) {
				o.Prefix = t.Name()
				o.Transport = TransportSHM
				o.HostID = "host0"
				o.SHM = SHMOptions{RingBytes: minRingBytes, SingleCopyBytes: minRingBytes/2 + 1}
				if o.Rank == off {
					o.SHM.SingleCopyBytes = -1
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeAll([]Endpoint{ws[0], ws[1]}) })
			ctx := tctx(t)
			buf := make([]byte, n)
			ch := goRecv(ctx, ws[1], 0, h, buf)
			if err := ws[0].Send(ctx, 1, h, payload(3, n)); err != nil {
				t.Fatal(err)
			}
			if r := waitResult(t, ch, 5*time.Second); r.err != nil {
				t.Fatal(r.err)
			}
			check(t, ws, buf, 3, 0)
		})
	}
}

// TestSHMSingleCopySendCancel: a single-copy send whose ctx ends before
// the receiver copied the message cannot take it back: like a send cut
// short mid-message, it aborts the endpoint, and the peer sees rank 0
// lost rather than reading memory the sender reuses.
func TestSHMSingleCopySendCancel(t *testing.T) {
	ws := shmSingleWorld(t, 2)
	ctx := tctx(t)
	ws[1].shm.role.Store(1) // nobody drains rank 1's rings
	// The ctx ends once the send is published, not at a fixed time: on a
	// loaded machine a short timeout could end it before the send starts,
	// when ending it needs no abort.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		d := ws[1].shm.in[0].d
		for atomic.LoadUint64(recSeq(d, 0)) == 0 && sctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err := ws[0].Send(sctx, 1, Header{Seq: 1, Sig: sig(1)}, make([]byte, 1<<20))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("send: %v", err)
	}
	if err := ws[0].mb.failed(); !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) {
		t.Fatalf("endpoint after a cancelled single-copy send: %v", err)
	}
	ws[1].shm.role.Store(0)
	_, err = ws[1].Recv(ctx, 0, Header{Seq: 2, Sig: sig(1)}, nil)
	var pe *PeerError
	if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pe) || pe.Peer != 0 {
		t.Fatalf("peer of a cancelled single-copy send: %v", err)
	}
}

// TestSHMSingleCopyBadAddress: a single-copy record naming memory the
// sender does not have makes the receiver fail the receive and count the
// sender as lost, saying what it could not copy.
func TestSHMSingleCopyBadAddress(t *testing.T) {
	ws := shmSingleWorld(t, 2)
	ctx := tctx(t)
	h := Header{Seq: 1, Sig: sig(1)}
	o := ws[0].shm.out[1]
	o.lock.lock(ctx, nil)
	off, err := ws[0].shm.reserve(ctx, o, recordSpan(8), true)
	if err != nil {
		t.Fatal(err)
	}
	putFirstHeader(o.d, off, &h, 1<<20, 8)
	o.d[off+8] = recSingle
	binary.LittleEndian.PutUint64(o.d[off+recHeader:], 4096) // the zero page: never mapped
	o.publish(off, recordSpan(8))
	o.lock.unlock()
	_, err = ws[1].Recv(ctx, 0, h, make([]byte, 1<<20))
	var pe *PeerError
	if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pe) || pe.Peer != 0 || !strings.Contains(err.Error(), "out of its memory") {
		t.Fatalf("got %v, want rank 0 lost, its message not copied", err)
	}
	t.Log(err)
}

// TestCanReadPeer: the probe succeeds on a process's own advertised word
// and fails on a wrong value, a wrong process or no advertisement.
func TestCanReadPeer(t *testing.T) {
	block := make([]byte, consBlockSize)
	c := consumerAt(block, 0)
	if _, ok := canReadPeer(c); ok {
		t.Fatal("probe succeeded with nothing advertised")
	}
	word := new(uint64)
	*word = probeValue(os.Getpid())
	*c.pid, *c.probe = uint64(os.Getpid()), uint64(uintptr(unsafe.Pointer(word)))
	if _, ok := canReadPeer(c); !ok {
		t.Fatal("probe of this process's own word failed")
	}
	*word ^= 1
	if _, ok := canReadPeer(c); ok {
		t.Fatal("probe succeeded on a wrong value")
	}
	*word ^= 1
	*c.pid = 1 << 30 // no such process
	if _, ok := canReadPeer(c); ok {
		t.Fatal("probe succeeded on a missing process")
	}
}

// startFunc is StartSend or StartSendCopy of an endpoint.
type startFunc func(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error)

// exchangeStarted has ranks 0 and 1 of ws each start a send of n bytes
// (payload seed+rank) to the other with start, run started (if not nil),
// receive the other's, then finish; and fails t unless both arrive whole.
func exchangeStarted(t *testing.T, ws []*Hybrid, h Header, n int, seed uint64, start func(*Hybrid) startFunc, started func(r int) error) {
	t.Helper()
	ctx := tctx(t)
	bufs := [2][]byte{make([]byte, n), make([]byte, n)}
	// With started, neither rank receives before both have looked at
	// their started sends: a receive that drains the peer's ring while
	// the peer is still in StartSend lets it write the whole message.
	var looked sync.WaitGroup
	looked.Add(2)
	bothRanks(t, func(r int) error {
		finish := start(ws[r])(ctx, 1-r, h, payload(seed+uint64(r), n))
		var err error
		if started != nil {
			err = started(r)
			looked.Done()
			looked.Wait()
		}
		if _, rerr := ws[r].Recv(ctx, 1-r, h, bufs[r]); err == nil {
			err = rerr
		}
		if ferr := finish(ctx); err == nil {
			err = ferr
		}
		return err
	})
	if !bytes.Equal(bufs[0], payload(seed+1, n)) || !bytes.Equal(bufs[1], payload(seed, n)) {
		t.Fatal("messages corrupted")
	}
}

// bothRanks runs f for ranks 0 and 1 at once and fails t if either fails.
func bothRanks(t *testing.T, f func(r int) error) {
	t.Helper()
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestSHMStartSend: StartSend of a single-copy message returns at once;
// both ranks start, then receive on the same goroutine, then finish. Small
// sends run at once. A started send whose endpoint closes before finish
// ends with ErrClosed, and the mapping it reads stays until it has.
func TestSHMStartSend(t *testing.T) {
	const n = 1 << 20
	ws := shmSingleWorld(t, 2)
	ctx := tctx(t)
	h := Header{Comm: 1, Seq: 1, Sig: sig(n)}
	if !ws[0].SendsStartable(1, n) || ws[0].SendsStartable(1, 100) || ws[0].SendsStartable(0, n) || ws[0].SendsStartable(7, n) {
		t.Fatal("SendsStartable: want single-copy sizes to peers only")
	}
	exchangeStarted(t, ws, h, n, 20, func(e *Hybrid) startFunc { return e.StartSend }, nil)
	if ws[0].shm.singleIn.Load() != 1 || ws[1].shm.singleIn.Load() != 1 {
		t.Fatal("not copied out of the senders' memory")
	}
	small := Header{Comm: 1, Seq: 2, Sig: sig(8)}
	if err := ws[0].StartSend(ctx, 1, small, payload(5, 8))(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ws[1].Recv(ctx, 0, small, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}

	// Nobody receives; rank 0 closes while its send is started.
	ws[1].shm.role.Store(1)
	finish := ws[0].StartSend(ctx, 1, Header{Comm: 1, Seq: 3, Sig: sig(n)}, make([]byte, n))
	closed := make(chan error, 1)
	go func() { closed <- ws[0].Close() }()
	if err := finish(ctx); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrAborted) {
		t.Fatalf("started send after Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	ws[1].shm.role.Store(0)
}
