package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/core"
)

func sig(count uint64) Signature {
	return Signature{Kind: core.KindAllReduce, DType: core.Float32, Op: core.Sum, Count: count}
}

func payload(seed uint64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(n))
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

func TestSendRecvExactBytes(t *testing.T) {
	sizes := []int{0, 1, 7, 8, 1000, 100_003}
	for _, frag := range []int{0, 7} {
		forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
			eps := world(2, worldConfig{maxFragment: frag})
			ctx := tctx(t)
			for i, n := range sizes {
				want := payload(uint64(i), n)
				// Receive posted first, then send.
				h := Header{Comm: 1, Seq: uint64(i + 1), Tag: 3, Sig: sig(uint64(n))}
				buf := make([]byte, n)
				ch := goRecv(ctx, eps[1], 0, h, buf)
				time.Sleep(time.Millisecond)
				if err := eps[0].Send(ctx, 1, h, want); err != nil {
					t.Fatal(err)
				}
				if r := waitResult(t, ch, 5*time.Second); r.err != nil || r.from != 0 {
					t.Fatalf("size %d (frag %d): recv-first: from %d, %v", n, frag, r.from, r.err)
				}
				if !bytes.Equal(buf, want) {
					t.Fatalf("size %d (frag %d): recv-first: payload differs", n, frag)
				}
				// Send first, then receive.
				h.Tag = 4
				if err := eps[1].Send(ctx, 0, h, want); err != nil {
					t.Fatal(err)
				}
				buf2 := make([]byte, n)
				if from, err := eps[0].Recv(ctx, 1, h, buf2); err != nil || from != 1 {
					t.Fatalf("size %d: send-first: from %d, %v", n, from, err)
				}
				if !bytes.Equal(buf2, want) {
					t.Fatalf("size %d (frag %d): send-first: payload differs", n, frag)
				}
			}
		})
	}
}

func TestFIFOPerKey(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{maxFragment: 16})
		ctx := tctx(t)
		h := Header{Comm: 7, Tag: 9, Sig: sig(0)}
		const n = 100
		done := make(chan error, 1)
		go func() {
			for i := range n {
				msg := fmt.Appendf(nil, "message %04d, padded to span fragments", i)
				if err := eps[0].Send(ctx, 1, h, msg); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := range n {
			want := fmt.Appendf(nil, "message %04d, padded to span fragments", i)
			buf := make([]byte, len(want))
			if i%3 == 0 {
				time.Sleep(100 * time.Microsecond) // mix queued and posted receives
			}
			if _, err := eps[1].Recv(ctx, 0, h, buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, want) {
				t.Fatalf("message %d: got %q", i, buf)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestAnySource(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(4, worldConfig{})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 0, Tag: 5, Sig: Signature{Kind: core.KindSend, DType: core.Byte}}
		// One receive posted before any message, the rest after.
		first := make([]byte, 1)
		ch := goRecv(ctx, eps[0], AnySource, h, first)
		time.Sleep(time.Millisecond)
		for r := 1; r < 4; r++ {
			if err := eps[r].Send(ctx, 0, h, []byte{byte(r)}); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[int]bool{}
		res := waitResult(t, ch, 5*time.Second)
		if res.err != nil || int(first[0]) != res.from {
			t.Fatalf("from %d payload %d err %v", res.from, first[0], res.err)
		}
		seen[res.from] = true
		for range 2 {
			buf := make([]byte, 1)
			from, err := eps[0].Recv(ctx, AnySource, h, buf)
			if err != nil || int(buf[0]) != from {
				t.Fatalf("from %d payload %d err %v", from, buf[0], err)
			}
			seen[from] = true
		}
		if len(seen) != 3 {
			t.Fatalf("senders %v, want 1, 2, 3", seen)
		}
	})
}

func TestConcurrentSendRecv(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		const n, msgs = 4, 40
		eps := world(n, worldConfig{maxFragment: 512})
		ctx := tctx(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2*n*n*msgs)
		for src := range n {
			for dst := range n {
				if src == dst {
					continue
				}
				for m := range msgs {
					h := Header{Comm: 2, Seq: uint64(1 + m%3), Tag: uint64(src<<8 | m), Sig: sig(uint64(m % 3))}
					size := (m * 97) % 3000
					wg.Go(func() {
						if err := eps[src].Send(ctx, dst, h, payload(uint64(src*1000+m), size)); err != nil {
							errs <- err
						}
					})
					wg.Go(func() {
						buf := make([]byte, size)
						if _, err := eps[dst].Recv(ctx, src, h, buf); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(buf, payload(uint64(src*1000+m), size)) {
							errs <- fmt.Errorf("%d->%d message %d corrupted", src, dst, m)
						}
					})
				}
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestLengthError(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{maxFragment: 4})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 1, Sig: sig(10)}
		check := func(err error) {
			t.Helper()
			var le *LengthError
			if !errors.As(err, &le) || !errors.Is(err, ErrLength) || le.Peer != 0 || le.Got != 10 || le.Want != 8 {
				t.Fatalf("got %v, want LengthError{0, 10, 8}", err)
			}
		}
		// Arrived first.
		if err := eps[0].Send(ctx, 1, h, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		_, err := eps[1].Recv(ctx, 0, h, make([]byte, 8))
		check(err)
		// Posted first.
		h.Tag = 1
		ch := goRecv(ctx, eps[1], 0, h, make([]byte, 8))
		time.Sleep(time.Millisecond)
		if err := eps[0].Send(ctx, 1, h, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		check(waitResult(t, ch, 5*time.Second).err)
		// The stream is intact afterwards.
		h.Tag = 2
		if err := eps[0].Send(ctx, 1, h, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 10)
		if _, err := eps[1].Recv(ctx, 0, h, buf); err != nil || string(buf) != "0123456789" {
			t.Fatalf("after LengthError: %q, %v", buf, err)
		}
	})
}

func TestMismatch(t *testing.T) {
	local := sig(4)
	remote := Signature{Kind: core.KindBroadcast, DType: core.Float32, Root: 1, Count: 4}
	check := func(t *testing.T, err error) {
		t.Helper()
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) {
			t.Fatalf("got %v, want *MismatchError", err)
		}
		if me.Peer != 0 || me.Seq != 5 || me.Local != local || me.Remote != remote {
			t.Fatalf("got %+v", me)
		}
	}
	cases := []struct {
		name       string
		postedTag  uint64 // tag of the receive; the message has tag 0
		postBefore bool
	}{
		{"same key, posted then arrives", 0, true},
		{"same key, arrived then posted", 0, false},
		{"other tag, posted then arrives", 1, true},
		{"other tag, arrived then posted", 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
				eps := world(2, worldConfig{})
				ctx := tctx(t)
				send := func() {
					if err := eps[0].Send(ctx, 1, Header{Comm: 3, Seq: 5, Tag: 0, Sig: remote}, make([]byte, 16)); err != nil {
						t.Fatal(err)
					}
				}
				h := Header{Comm: 3, Seq: 5, Tag: tc.postedTag, Sig: local}
				if tc.postBefore {
					ch := goRecv(ctx, eps[1], 0, h, make([]byte, 16))
					time.Sleep(5 * time.Millisecond)
					send()
					check(t, waitResult(t, ch, 5*time.Second).err)
				} else {
					send()
					time.Sleep(20 * time.Millisecond) // let TCP's reader queue it
					_, err := eps[1].Recv(ctx, 0, h, make([]byte, 16))
					check(t, err)
				}
			})
		})
	}
}

func TestRecvCancel(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 2, Tag: 3, Sig: sig(3)}
		cctx, cancel := context.WithCancel(ctx)
		ch := goRecv(cctx, eps[1], 0, h, make([]byte, 3))
		time.Sleep(5 * time.Millisecond)
		cancel()
		if r := waitResult(t, ch, 5*time.Second); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", r.err)
		}
		// The endpoint still works, and the message is kept for a later receive.
		if err := eps[0].Send(ctx, 1, h, []byte("abc")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := eps[1].Recv(ctx, 0, h, buf); err != nil || string(buf) != "abc" {
			t.Fatalf("got %q, %v", buf, err)
		}
		// A deadline on a receive that never matches.
		dctx, dcancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer dcancel()
		if _, err := eps[1].Recv(dctx, 0, h, buf); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want DeadlineExceeded", err)
		}
	})
}

// TestRecvCancelMidMessage cancels a receive while a large message is
// being read into its buffer; the message must survive intact.
func TestRecvCancelMidMessage(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{maxFragment: 4096})
		ctx := tctx(t)
		want := payload(1, 4<<20)
		for i := range 3 {
			h := Header{Comm: 1, Seq: uint64(i + 1), Sig: sig(1)}
			cctx, cancel := context.WithCancel(ctx)
			buf := make([]byte, len(want))
			ch := goRecv(cctx, eps[1], 0, h, buf)
			time.Sleep(time.Millisecond)
			sent := make(chan error, 1)
			go func() { sent <- eps[0].Send(ctx, 1, h, want) }()
			time.Sleep(time.Duration(i) * time.Millisecond)
			cancel()
			r := waitResult(t, ch, 5*time.Second)
			switch {
			case r.err == nil:
				if !bytes.Equal(buf, want) {
					t.Fatal("completed receive has wrong payload")
				}
			case errors.Is(r.err, context.Canceled):
				buf2 := make([]byte, len(want))
				if _, err := eps[1].Recv(ctx, 0, h, buf2); err != nil || !bytes.Equal(buf2, want) {
					t.Fatalf("message after cancelled receive: %v", err)
				}
			default:
				t.Fatal(r.err)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		}
	})
}

func kill(e Endpoint) {
	e.(interface{ kill() }).kill()
}

func TestDeadPeer(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(4, worldConfig{})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 1, Sig: sig(1)}
		var chans []<-chan recvResult
		for _, r := range []int{0, 2, 3} {
			chans = append(chans, goRecv(ctx, eps[r], 1, h, make([]byte, 1)))
		}
		// A receive from a live peer fails too: the endpoint aborts.
		chans = append(chans, goRecv(ctx, eps[0], 2, h, make([]byte, 1)))
		time.Sleep(5 * time.Millisecond)
		start := time.Now()
		kill(eps[1])
		for i, ch := range chans {
			r := waitResult(t, ch, 5*time.Second)
			var pe *PeerError
			if !errors.Is(r.err, ErrAborted) || !errors.Is(r.err, ErrPeerLost) || !errors.As(r.err, &pe) || pe.Peer != 1 {
				t.Fatalf("receive %d: got %v, want aborted, peer 1 lost", i, r.err)
			}
		}
		t.Logf("every receive failed within %v of the kill", time.Since(start))
		// Later operations fail the same way.
		if err := eps[2].Send(ctx, 3, h, []byte{1}); !errors.Is(err, ErrPeerLost) {
			t.Fatalf("send after peer loss: %v", err)
		}
		if _, err := eps[3].Recv(ctx, 2, h, make([]byte, 1)); !errors.Is(err, ErrAborted) {
			t.Fatalf("recv after peer loss: %v", err)
		}
	})
}

// TestLostPeerKeepsItsMessages: a peer that vanishes without a goodbye
// right after sending (killed, or exited without Close) is a loss only for
// operations that still need it. What it sent is received intact, ranks
// that do not need it go on, and only a receive from it fails, naming it.
func TestLostPeerKeepsItsMessages(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(3, worldConfig{})
		ctx := tctx(t)
		hdr := func(seq uint64, n int) Header { return Header{Comm: 1, Seq: seq, Sig: sig(uint64(n))} }
		// Rank 2 waits for rank 0 meanwhile.
		got2 := make([]byte, 64)
		pending := goRecv(ctx, eps[2], 0, hdr(9, 64), got2)
		sizes := []int{100, 100 << 10, 200 << 10} // all still in the ring when the loss is seen
		for i, n := range sizes {
			if err := eps[1].Send(ctx, 0, hdr(uint64(i+1), n), payload(uint64(i), n)); err != nil {
				t.Fatal(err)
			}
		}
		kill(eps[1])
		time.Sleep(50 * time.Millisecond) // rank 0 sees the connection end first
		for i, n := range sizes {
			buf := make([]byte, n)
			if _, err := eps[0].Recv(ctx, 1, hdr(uint64(i+1), n), buf); err != nil {
				t.Fatalf("message %d (%d bytes) sent before the loss: %v", i, n, err)
			}
			if !bytes.Equal(buf, payload(uint64(i), n)) {
				t.Fatalf("message %d (%d bytes): payload differs", i, n)
			}
		}
		if err := eps[0].Send(ctx, 2, hdr(9, 64), payload(9, 64)); err != nil {
			t.Fatalf("send to a live rank after the loss: %v", err)
		}
		if r := waitResult(t, pending, 5*time.Second); r.err != nil || !bytes.Equal(got2, payload(9, 64)) {
			t.Fatalf("receive between live ranks: %v", r.err)
		}
		_, err := eps[0].Recv(ctx, 1, hdr(7, 1), make([]byte, 1))
		var pe *PeerError
		if !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) || !errors.As(err, &pe) || pe.Peer != 1 {
			t.Fatalf("receive from the lost rank: got %v, want rank 1 lost", err)
		}
	})
}

func TestGoodbye(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(3, worldConfig{})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 0, Tag: 1, Sig: sig(1)}
		pending := goRecv(ctx, eps[0], 1, Header{Comm: 1, Tag: 99, Sig: sig(1)}, make([]byte, 1))
		time.Sleep(5 * time.Millisecond)
		for i := range 2 {
			if err := eps[1].Send(ctx, 0, h, []byte{byte(10 + i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := eps[1].Close(); err != nil {
			t.Fatal(err)
		}
		isClosed := func(err error) bool {
			var pe *PeerError
			return errors.Is(err, ErrPeerClosed) && errors.As(err, &pe) && pe.Peer == 1 && !errors.Is(err, ErrAborted)
		}
		if r := waitResult(t, pending, 5*time.Second); !isClosed(r.err) {
			t.Fatalf("pending receive: got %v, want ErrPeerClosed from rank 1", r.err)
		}
		for i := range 2 {
			buf := make([]byte, 1)
			if _, err := eps[0].Recv(ctx, 1, h, buf); err != nil || buf[0] != byte(10+i) {
				t.Fatalf("queued message %d: %v %v", i, buf, err)
			}
		}
		if _, err := eps[0].Recv(ctx, 1, h, make([]byte, 1)); !isClosed(err) {
			t.Fatalf("later receive: got %v", err)
		}
		if err := eps[0].Send(ctx, 1, h, []byte{1}); !isClosed(err) {
			t.Fatalf("send to closed peer: got %v", err)
		}
		// Other peers are unaffected.
		if err := eps[2].Send(ctx, 0, h, []byte{42}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if from, err := eps[0].Recv(ctx, AnySource, h, buf); err != nil || from != 2 || buf[0] != 42 {
			t.Fatalf("from %d %v %v", from, buf, err)
		}
		// Once every peer is gone, AnySource receives fail.
		any := goRecv(ctx, eps[0], AnySource, h, make([]byte, 1))
		time.Sleep(5 * time.Millisecond)
		eps[2].Close()
		if r := waitResult(t, any, 5*time.Second); !errors.Is(r.err, ErrPeerClosed) {
			t.Fatalf("AnySource after all peers left: %v", r.err)
		}
	})
}

func TestAbortPropagates(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(3, worldConfig{})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 4, Sig: sig(1)}
		ch0 := goRecv(ctx, eps[0], 1, h, make([]byte, 1))
		ch2 := goRecv(ctx, eps[2], 1, h, make([]byte, 1))
		time.Sleep(5 * time.Millisecond)
		boom := errors.New("boom: step 7 diverged")
		eps[1].Abort(boom)
		for i, ch := range []<-chan recvResult{ch0, ch2} {
			r := waitResult(t, ch, 5*time.Second)
			// The abort may come straight from rank 1 or be passed on
			// by the other receiver: either way it names rank 1.
			var ra *RemoteAbortError
			if !errors.As(r.err, &ra) || !errors.Is(r.err, ErrAborted) || ra.Reason != boom.Error() ||
				ra.Origin != 1 || ra.Reporter != 1 || ra.Kind != core.FailError {
				t.Fatalf("receiver %d: got %v", i, r.err)
			}
		}
		_, err := eps[1].Recv(ctx, 0, h, make([]byte, 1))
		if !errors.Is(err, ErrAborted) || !errors.Is(err, boom) {
			t.Fatalf("aborting rank: got %v", err)
		}
		if err := eps[1].Send(ctx, 0, h, nil); !errors.Is(err, boom) {
			t.Fatalf("aborting rank send: got %v", err)
		}
		eps[1].Abort(errors.New("second")) // no effect
		if _, err := eps[0].Recv(ctx, 2, h, make([]byte, 1)); !errors.Is(err, ErrAborted) {
			t.Fatalf("later receive: %v", err)
		}
	})
}

func TestClose(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{})
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 1, Sig: sig(1)}
		ch := goRecv(ctx, eps[0], 1, h, make([]byte, 1))
		time.Sleep(5 * time.Millisecond)
		eps[0].Close()
		if r := waitResult(t, ch, 5*time.Second); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("pending receive: %v", r.err)
		}
		if _, err := eps[0].Recv(ctx, 1, h, make([]byte, 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("later receive: %v", err)
		}
		if err := eps[0].Send(ctx, 1, h, []byte{1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("later send: %v", err)
		}
		if err := eps[0].Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBadPeer(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{})
		ctx := tctx(t)
		h := Header{Sig: sig(0)}
		for _, p := range []int{0, -2, 2} {
			if err := eps[0].Send(ctx, p, h, nil); !errors.Is(err, ErrBadPeer) {
				t.Errorf("Send to %d: %v", p, err)
			}
			if _, err := eps[0].Recv(ctx, p, h, nil); !errors.Is(err, ErrBadPeer) {
				t.Errorf("Recv from %d: %v", p, err)
			}
		}
	})
}

func TestWorldOfOne(t *testing.T) {
	ctx := tctx(t)
	e, err := ConnectTCP(ctx, nil, TCPOptions{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Recv(ctx, AnySource, Header{}, nil); !errors.Is(err, ErrBadPeer) {
		t.Fatalf("AnySource in a world of 1: %v", err)
	}
	e.Close()
	if w := NewInprocWorld(1, InprocOptions{}); len(w) != 1 || w[0].Size() != 1 {
		t.Fatal("inproc world of 1")
	}
}
