//go:build linux && !gocomm_portable

package transport

import (
	"testing"
	"time"
)

// TestHybridRecvSink: RecvSink hands every byte of the message to the
// sink in order and never writes buf, whether the message streams
// through the ring (SendCopy keeps even a single-copy-sized message
// there), is copied out of the sender's memory (in sinkStageBytes
// pieces), or arrived before the receive was posted.
func TestHybridRecvSink(t *testing.T) {
	const n = sinkStageBytes*2 + 12345 // above the test rings' single-copy size
	h := Header{Comm: 1, Seq: 1, Sig: sig(n)}

	t.Run("ring", func(t *testing.T) {
		ws := shmWorld(t, 2)
		ctx := tctx(t)
		var l sinkLog
		buf := make([]byte, n)
		ch := make(chan error, 1)
		go func() { _, err := ws[1].RecvSink(ctx, 0, h, buf, l.sink); ch <- err }()
		// Posted first: chunks that arrive before it are collected aside
		// and handed over as one piece (a CI run got 27 pieces so).
		waitFor(t, "receive posted", func() bool { return !ws[1].mb.quietFor(0, &h) })
		if err := ws[0].SendCopy(ctx, 1, h, payload(1, n)); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		if got := ws[1].shm.singleIn.Load(); got != 0 {
			t.Fatalf("SendCopy went by single copy (%d messages)", got)
		}
		l.check(t, payload(1, n), buf, n/(16<<10))
	})

	t.Run("single-copy", func(t *testing.T) {
		ws := shmSingleWorld(t, 2)
		ctx := tctx(t)
		var l sinkLog
		buf := make([]byte, n)
		ch := make(chan error, 1)
		go func() { _, err := ws[1].RecvSink(ctx, 0, h, buf, l.sink); ch <- err }()
		waitFor(t, "receive posted", func() bool { return !ws[1].mb.quietFor(0, &h) })
		if err := ws[0].Send(ctx, 1, h, payload(2, n)); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		if got := ws[1].shm.singleIn.Load(); got != 1 {
			t.Fatalf("%d messages went by single copy, want 1", got)
		}
		l.check(t, payload(2, n), buf, 3)
	})

	t.Run("queued", func(t *testing.T) {
		ws := shmWorld(t, 2)
		ctx := tctx(t)
		const small = 1000
		hs := Header{Comm: 1, Seq: 2, Sig: sig(small)}
		if err := ws[0].Send(ctx, 1, hs, payload(3, small)); err != nil {
			t.Fatal(err)
		}
		// Let the receiver's drainer queue it.
		time.Sleep(10 * time.Millisecond)
		var l sinkLog
		buf := make([]byte, small)
		if _, err := ws[1].RecvSink(ctx, 0, hs, buf, l.sink); err != nil {
			t.Fatal(err)
		}
		l.check(t, payload(3, small), buf, 1)
	})

	t.Run("bad-peer", func(t *testing.T) {
		ws := shmWorld(t, 2)
		if _, err := ws[1].RecvSink(tctx(t), AnySource, h, make([]byte, 8), func(int, []byte) {}); err == nil {
			t.Fatal("RecvSink from AnySource succeeded")
		}
	})
}
