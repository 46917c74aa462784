//go:build linux && !gocomm_portable

package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// TestSHMStreams: with single copy off, a send too large for its ring
// starts (StartSend returns with most of it unwritten) and is written by
// the receive its goroutine runs next, or by finish; StartSendCopy does
// the same where single copy is on; several streams to one peer go one
// after another; a stream whose ctx ends mid-message aborts the endpoint
// as any send cut short does.
func TestSHMStreams(t *testing.T) {
	const n = 1<<20 + 12345 // 16 rings of 64 KiB
	h := func(seq uint64) Header { return Header{Comm: 1, Seq: seq, Sig: sig(n)} }

	t.Run("exchange", func(t *testing.T) {
		ws := shmWorld(t, 2)
		if !ws[0].SendsStartable(1, n) || ws[0].SendsStartable(1, minRingBytes/2) || ws[0].SendsStartable(0, n) {
			t.Fatal("SendsStartable: want sends larger than half a ring, to peers")
		}
		exchangeStarted(t, ws, h(1), n, 30, func(e *Hybrid) startFunc { return e.StartSend }, func(r int) error {
			if ws[r].shm.streams.n.Load() != 1 {
				return errors.New("StartSend wrote the whole message before returning")
			}
			return nil
		})
		for r, e := range ws {
			if e.shm.singleIn.Load() != 0 || e.shm.streams.n.Load() != 0 {
				t.Fatalf("rank %d: %d single copies, %d streams left", r, e.shm.singleIn.Load(), e.shm.streams.n.Load())
			}
		}
	})

	t.Run("copy", func(t *testing.T) {
		// StartSendCopy streams through the ring where single copy is on.
		ws := shmSingleWorld(t, 2)
		if !ws[0].CopiesStartable(1, n) || ws[0].CopiesStartable(1, minRingBytes/2) {
			t.Fatal("CopiesStartable: want sends larger than half a ring")
		}
		exchangeStarted(t, ws, h(1), n, 50, func(e *Hybrid) startFunc { return e.StartSendCopy }, nil)
		if ws[0].shm.singleIn.Load() != 0 || ws[1].shm.singleIn.Load() != 0 {
			t.Fatal("copied out of the senders' memory, not through the rings")
		}
	})

	t.Run("finish-writes", func(t *testing.T) {
		// Rank 0 receives nothing: finish alone writes the rest, and
		// three streams to one peer go in the order they started.
		ws := shmWorld(t, 2)
		ctx := tctx(t)
		var finishes []func(context.Context) error
		for i := range 3 {
			finishes = append(finishes, ws[0].StartSend(ctx, 1, h(uint64(i+1)), payload(uint64(40+i), n)))
		}
		got := make(chan error, 1)
		bufs := [3][]byte{make([]byte, n), make([]byte, n), make([]byte, n)}
		go func() {
			for i := range 3 {
				if _, err := ws[1].Recv(ctx, 0, h(uint64(i+1)), bufs[i]); err != nil {
					got <- err
					return
				}
			}
			got <- nil
		}()
		for i := len(finishes) - 1; i >= 0; i-- { // the last first: it must write the others
			if err := finishes[i](ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		for i := range bufs {
			if !bytes.Equal(bufs[i], payload(uint64(40+i), n)) {
				t.Fatalf("message %d corrupted", i)
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ws := shmWorld(t, 2)
		ctx := tctx(t)
		ws[1].shm.role.Store(1) // nobody drains rank 1's rings
		sctx, cancel := context.WithCancel(ctx)
		finish := ws[0].StartSend(sctx, 1, h(1), make([]byte, n))
		cancel()
		if err := finish(sctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("finish: %v", err)
		}
		if err := ws[0].mb.failed(); !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) {
			t.Fatalf("endpoint after a stream cut short: %v", err)
		}
		ws[1].shm.role.Store(0)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		_, err := ws[1].Recv(rctx, 0, h(2), make([]byte, n))
		var pe *PeerError
		if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pe) || pe.Peer != 0 {
			t.Fatalf("peer of a stream cut short: %v", err)
		}
	})
}
