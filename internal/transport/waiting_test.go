package transport

import (
	"errors"
	"testing"
	"time"
)

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

// TestWaitingNotices: a rank's notice of whom it waits for reaches every
// peer, is replaced by a later one, is retracted, expires by itself when
// not renewed, and is no longer sent once the endpoint has aborted.
func TestWaitingNotices(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			eps := im.build(t, 3, worldConfig{})
			wn := func(r int) WaitNotifier { return eps[r].(WaitNotifier) }
			heard := func(want int) func() bool {
				return func() bool { return wn(1).PeerWaiting(0) == want && wn(2).PeerWaiting(0) == want }
			}
			if got := wn(1).PeerWaiting(0); got != -1 {
				t.Fatalf("before any notice rank 1 says rank 0 waits for %d", got)
			}
			wn(0).NoteWaiting(2, time.Minute)
			eventually(t, "ranks 1 and 2 did not hear that rank 0 waits for rank 2", heard(2))
			wn(0).NoteWaiting(1, time.Minute)
			eventually(t, "the notice was not replaced", heard(1))
			wn(0).NoteWaiting(-1, 0)
			eventually(t, "the notice was not retracted", heard(-1))
			wn(0).NoteWaiting(2, 50*time.Millisecond)
			eventually(t, "the short notice did not arrive", func() bool { return wn(1).PeerWaiting(0) == 2 })
			time.Sleep(100 * time.Millisecond)
			if got := wn(1).PeerWaiting(0); got != -1 {
				t.Errorf("a notice held for 50 ms still says rank 0 waits for %d after 100 ms", got)
			}
			wn(0).NoteWaiting(0, time.Minute) // itself: ignored
			wn(0).NoteWaiting(3, time.Minute) // outside the world: ignored
			if got := wn(1).PeerWaiting(7); got != -1 {
				t.Errorf("PeerWaiting of a rank outside the world: %d", got)
			}
			fs := eps[0].(FailureSignal)
			select {
			case <-fs.Failed():
				t.Fatal("Failed is closed before any failure")
			default:
			}
			eps[0].Abort(errors.New("boom"))
			select {
			case <-fs.Failed():
			case <-time.After(5 * time.Second):
				t.Fatal("Failed is not closed after Abort")
			}
			wn(0).NoteWaiting(2, time.Minute)
			time.Sleep(50 * time.Millisecond)
			if got := wn(1).PeerWaiting(0); got != -1 {
				t.Errorf("an aborted endpoint still sent a notice: rank 1 heard rank 0 waits for %d", got)
			}
		})
	}
}

// TestWaitingFrame: a waiting frame's fields are bounded: no payload, a
// rank within the world, a bounded life.
func TestWaitingFrame(t *testing.T) {
	fh := waitingHeader(waitNotice{rank: 2, valid: 1500 * time.Millisecond})
	var hb [headerSize]byte
	fh.encode(hb[:])
	got, err := decodeFrameHeader(hb[:], DefaultMaxFragment)
	if err != nil {
		t.Fatal(err)
	}
	w, err := waitingNotice(&got, 3)
	if err != nil || w.rank != 2 || w.valid != 1500*time.Millisecond {
		t.Fatalf("decoded %+v, %v; want rank 2 for 1.5 s", w, err)
	}
	if _, err := waitingNotice(&got, 2); err == nil {
		t.Error("a notice naming rank 2 in a world of 2 was accepted")
	}
	for _, bad := range []frameHeader{
		{typ: frameWaiting, total: 1, fragLen: 1},
		{typ: frameWaiting, h: Header{Seq: maxWaitingValid + 1}},
	} {
		bad.encode(hb[:])
		if _, err := decodeFrameHeader(hb[:], DefaultMaxFragment); err == nil {
			t.Errorf("frame %+v accepted", bad)
		}
	}
}
