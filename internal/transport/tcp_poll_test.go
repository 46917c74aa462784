package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loopbackPair returns the two ends of a new TCP connection over
// 127.0.0.1: w the dialled one, r the accepted one.
func loopbackPair(t *testing.T) (w, r net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err = ln.Accept()
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	return w, r
}

// TestPollingReader: the connection reader returns what arrives, whether
// it was polling or parked when it came, and io.EOF when the peer hangs
// up, for every spin (none, short, longer than the wait); it polls where
// the build has polling reads and is the connection itself elsewhere.
func TestPollingReader(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond, time.Second} {
		w, r := loopbackPair(t)
		var s atomic.Int64
		s.Store(int64(spin))
		pr := newConnReader(r, &s, new(atomic.Int32))
		want := "*transport.pollingReader" // tcp_poll_linux.go
		if !pollingReads {
			want = fmt.Sprintf("%T", r) // plain blocking reads
		}
		if got := fmt.Sprintf("%T", pr); got != want {
			t.Fatalf("a TCP connection is read through %s, want %s (pollingReads %v)", got, want, pollingReads)
		}
		go func() {
			w.Write([]byte("now"))
			time.Sleep(50 * time.Millisecond) // past a short spin: the reader parks
			w.Write([]byte("later"))
			w.Close()
		}()
		got, err := io.ReadAll(pr)
		if err != nil || !bytes.Equal(got, []byte("nowlater")) {
			t.Fatalf("spin %v: read %q, %v; want \"nowlater\" then EOF", spin, got, err)
		}
		r.Close()
	}
}

// TestReadProbe: the probe of a crowded host's receive says whether the
// socket has bytes without taking them, and counts a hang-up as
// something to read; builds without polling reads have none.
func TestReadProbe(t *testing.T) {
	w, r := loopbackPair(t)
	defer r.Close()
	p := newReadProbe(r)
	if !pollingReads {
		if p != nil {
			t.Fatalf("newReadProbe = %v in a build without polling reads, want nil", p)
		}
		return
	}
	if p.readable() {
		t.Fatal("readable() on a socket nobody wrote to")
	}
	w.Write([]byte("x"))
	deadline := time.Now().Add(5 * time.Second)
	for !p.readable() {
		if time.Now().After(deadline) {
			t.Fatal("readable() still false 5s after the peer wrote a byte")
		}
		time.Sleep(time.Millisecond)
	}
	var b [2]byte
	if n, err := r.Read(b[:]); n != 1 || b[0] != 'x' || err != nil {
		t.Fatalf("read after the probe: %q, %v; want the byte the probe saw", b[:n], err)
	}
	if p.readable() {
		t.Fatal("readable() after the byte was read")
	}
	w.Close()
	for !p.readable() {
		if time.Now().After(deadline) {
			t.Fatal("readable() still false 5s after the peer hung up")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCrowdedReceive: on a crowded host (TCP.crowd) a receive yields until
// its peer's bytes are in the socket, then takes the message as any
// receive does; it stops yielding when its context ends, when the
// endpoint fails, and after the bound, and a message that comes later
// still arrives (the receive parks like any other).
func TestCrowdedReceive(t *testing.T) {
	if !pollingReads {
		t.Skip("no yielding receives in a build without polling reads (not Linux, or gocomm_portable)")
	}
	tcps, err := connectTCPWorld(2, func(o *TCPOptions) { o.Prefix = t.Name() })
	asWorld(t, tcps, err)
	a, b := tcps[0], tcps[1]
	b.crowd()
	if got := time.Duration(b.yieldWait.Load()); got != crowdedYieldWait || b.readSpin.Load() != 0 {
		t.Fatalf("after crowd: yield wait %v, read spin %v; want %v and 0", got, time.Duration(b.readSpin.Load()), crowdedYieldWait)
	}
	ctx := tctx(t)
	c := b.conns[0]
	seq := uint64(0)
	post := func(ctx context.Context, n int) (*recvOp, Header) {
		t.Helper()
		seq++
		h := Header{Comm: 1, Seq: seq, Sig: sig(uint64(n))}
		r, _, _, err := b.mb.startRecvMode(ctx, 0, h, make([]byte, n), false, nil)
		if r == nil || err != nil {
			t.Fatalf("posting receive %d: %v, %v; want a posted receive", seq, r, err)
		}
		return r, h
	}

	// The peer's bytes come while the receive yields.
	r, h := post(ctx, 8)
	go func() {
		time.Sleep(2 * time.Millisecond)
		a.Send(ctx, 1, h, []byte("01234567"))
	}()
	if end := c.yieldUntilReadable(ctx, r, &b.mb.hasFailed, int64(time.Minute)); end != yieldReadable && end != yieldDone {
		t.Fatalf("yield ended with %d, want readable (%d) or done (%d)", end, yieldReadable, yieldDone)
	}
	if from, n, err := b.mb.wait(ctx, r); from != 0 || n != 8 || err != nil || string(r.buf) != "01234567" {
		t.Fatalf("after yielding: from %d, %d bytes %q, %v; want 8 bytes from 0", from, n, r.buf, err)
	}

	// Nothing comes: the bound ends the yield, then the context.
	r, _ = post(ctx, 8)
	if end := c.yieldUntilReadable(ctx, r, &b.mb.hasFailed, int64(time.Millisecond)); end != yieldTimeout {
		t.Fatalf("yield with nothing sent ended with %d, want the bound (%d)", end, yieldTimeout)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	if end := c.yieldUntilReadable(short, r, &b.mb.hasFailed, int64(time.Minute)); end != yieldCtx {
		t.Fatalf("yield whose context ended: %d, want %d", end, yieldCtx)
	}
	cancel()
	if !b.mb.cancelRecv(r) {
		t.Fatal("a receive nothing was sent to was not withdrawn")
	}

	// Through Recv and RecvUpTo: a message that comes at once, and one
	// that comes long after the bound.
	for _, delay := range []time.Duration{0, 20 * crowdedYieldWait} {
		seq++
		h := Header{Comm: 1, Seq: seq, Sig: sig(4)}
		go func() {
			time.Sleep(delay)
			a.Send(ctx, 1, h, []byte("abcd"))
		}()
		buf := make([]byte, 4)
		if from, err := b.Recv(ctx, 0, h, buf); from != 0 || err != nil || string(buf) != "abcd" {
			t.Fatalf("Recv, sent after %v: from %d, %q, %v", delay, from, buf, err)
		}
		seq++
		hs := Header{Comm: 1, Seq: seq, Sig: sig(4)}
		go func() {
			time.Sleep(delay)
			a.Send(ctx, 1, hs, []byte("efg"))
		}()
		buf = make([]byte, 8)
		if n, from, err := b.RecvUpTo(ctx, 0, hs, buf); from != 0 || n != 3 || err != nil || string(buf[:n]) != "efg" {
			t.Fatalf("RecvUpTo, sent after %v: from %d, %q, %v", delay, from, buf[:n], err)
		}
	}

	// The endpoint fails while a receive yields.
	r, _ = post(ctx, 8)
	go func() {
		time.Sleep(2 * time.Millisecond)
		b.mb.fail(ErrClosed)
	}()
	if end := c.yieldUntilReadable(ctx, r, &b.mb.hasFailed, int64(time.Minute)); end != yieldFailed && end != yieldDone {
		t.Fatalf("yield of a failed endpoint ended with %d, want failed (%d) or done (%d)", end, yieldFailed, yieldDone)
	}
	if _, _, err := b.mb.wait(ctx, r); err == nil {
		t.Fatal("a receive of a failed endpoint succeeded")
	}
}

// TestSendWaitsForRoom: messages larger than the sockets' buffers, sent
// both ways at once, arrive intact whether the sender's wait for room
// (connWriter.waitRoom) writes all of the rest, or writes part of it and
// hands what is left to the blocking write (a spin of 1 ns gives up at
// the first full socket), and with several fragments per message.
func TestSendWaitsForRoom(t *testing.T) {
	for _, tt := range []struct {
		name string
		spin time.Duration
		frag int
	}{
		{"default spin", 0, 0},
		{"1ns spin", time.Nanosecond, 0},
		{"1ns spin, 64 KiB fragments", time.Nanosecond, 64 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eps, err := connectTCPWorldCtx(10*time.Second, 2, func(o *TCPOptions) {
				o.ReadSpin, o.MaxFragment = tt.spin, tt.frag
			})
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll([]Endpoint{eps[0], eps[1]})
			ctx := tctx(t)
			const n = 24<<20 + 3
			for round := range 3 {
				h := Header{Comm: 1, Seq: uint64(round + 1), Sig: sig(2)}
				var want, got [2][]byte
				var recvs [2]<-chan recvResult
				for r := range 2 {
					want[r], got[r] = payload(uint64(2*round+r), n), make([]byte, n)
					recvs[r] = goRecv(ctx, eps[r], 1-r, h, got[r])
				}
				var sendErr [2]error
				var wg sync.WaitGroup
				for r := range 2 {
					wg.Go(func() { sendErr[r] = eps[r].Send(ctx, 1-r, h, want[r]) })
				}
				wg.Wait()
				for r := range 2 {
					if sendErr[r] != nil {
						t.Fatalf("round %d: rank %d's send: %v", round, r, sendErr[r])
					}
					if res := waitResult(t, recvs[r], 20*time.Second); res.err != nil {
						t.Fatalf("round %d: rank %d's receive: %v", round, r, res.err)
					}
					if !bytes.Equal(got[r], want[1-r]) {
						t.Fatalf("round %d: rank %d received other bytes than rank %d sent", round, r, 1-r)
					}
				}
			}
		})
	}
}
