package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/rendezvous"
)

func dialStray(t *testing.T, addr []byte) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", string(addr), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	t.Cleanup(func() { conn.Close() })
	return conn
}

// expectRefused waits for the acceptor's refusal of one stray connection.
func expectRefused(t *testing.T, refused <-chan error, what string) {
	t.Helper()
	select {
	case err := <-refused:
		if !errors.Is(err, ErrHandshake) {
			t.Errorf("%s: refused with %v, want ErrHandshake", what, err)
		}
		t.Logf("%s: %v", what, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not refused", what)
	}
}

func TestHandshakeRefusesStrays(t *testing.T) {
	const n = 3
	ctx := tctx(t)
	store := rendezvous.NewMemStore()
	refused := make(chan error, 16)
	accepted := make(chan int, n)
	eps := make([]*TCP, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := func(r int) {
		o := TCPOptions{Rank: r, Size: n, Prefix: "job", Secret: []byte("right"), CloseTimeout: time.Second}
		if r == 0 {
			o.hooks = &tcpHooks{accepted: func(p int) { accepted <- p }, refused: func(err error) { refused <- err }}
		}
		wg.Go(func() { eps[r], errs[r] = ConnectTCP(ctx, store, o) })
	}
	start(0)
	addr, err := store.Get(ctx, "job/addr/0")
	if err != nil {
		t.Fatal(err)
	}
	// A connection that never says anything blocks nobody.
	dialStray(t, addr)

	garbage := dialStray(t, addr)
	garbage.Write([]byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 4)))
	if _, err := io.ReadFull(garbage, make([]byte, 1)); err == nil {
		t.Error("garbage: connection not closed")
	}
	expectRefused(t, refused, "garbage")

	wrongIdentity := []struct {
		name string
		hc   handshakeConfig
	}{
		{"wrong world size", handshakeConfig{rank: 2, size: 4, job: jobID("job"), secret: []byte("right"), maxFragment: 1024}},
		{"other job", handshakeConfig{rank: 2, size: n, job: jobID("other"), secret: []byte("right"), maxFragment: 1024}},
		{"rank out of range", handshakeConfig{rank: 7, size: n, job: jobID("job"), secret: []byte("right"), maxFragment: 1024}},
	}
	for _, tc := range wrongIdentity {
		if _, err := tc.hc.dialHandshake(dialStray(t, addr), 0); err == nil {
			t.Errorf("%s: handshake succeeded", tc.name)
		}
		expectRefused(t, refused, tc.name)
	}

	// Wrong secret: the stray speaks the protocol but cannot prove itself.
	conn := dialStray(t, addr)
	hc := handshakeConfig{rank: 1, size: n, job: jobID("job"), secret: []byte("wrong"), maxFragment: 1024}
	h, _ := hc.hello(0)
	helloD := h.encode()
	conn.Write(helloD)
	in := make([]byte, helloSize+macSize)
	if _, err := io.ReadFull(conn, in); err != nil {
		t.Fatal(err)
	}
	conn.Write(handshakeMAC(hc.secret, dialerLabel, helloD, in[:helloSize]))
	if _, err := io.ReadFull(conn, make([]byte, 1)); err == nil {
		t.Error("wrong secret: acknowledged")
	}
	expectRefused(t, refused, "wrong secret")

	// The real rank 1 connects; then an impostor with the right secret
	// claiming rank 1 is refused as a duplicate.
	start(1)
	select {
	case p := <-accepted:
		if p != 1 {
			t.Fatalf("accepted rank %d", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("rank 1 not accepted")
	}
	dup := handshakeConfig{rank: 1, size: n, job: jobID("job"), secret: []byte("right"), maxFragment: 1024}
	if _, err := dup.dialHandshake(dialStray(t, addr), 0); !errors.Is(err, ErrHandshake) {
		t.Errorf("duplicate rank: %v", err)
	}
	expectRefused(t, refused, "duplicate rank")

	start(2)
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer func() {
		for _, e := range eps {
			e.Close()
		}
		checkNoLeaks(t)
	}()
	// The mesh works.
	hd := Header{Comm: 1, Seq: 1, Sig: sig(1)}
	for r := 1; r < n; r++ {
		if err := eps[r].Send(ctx, 0, hd, []byte{byte(r)}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := eps[0].Recv(ctx, r, hd, buf); err != nil || buf[0] != byte(r) {
			t.Fatalf("from %d: %v %v", r, buf, err)
		}
	}
}

func TestConnectNamesMissingRanks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := ConnectTCP(ctx, rendezvous.NewMemStore(), TCPOptions{Rank: 0, Size: 3})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "ranks [1 2] never connected") {
		t.Fatalf("got %v", err)
	}
	checkNoLeaks(t)
}

func TestConnectWrongSecret(t *testing.T) {
	_, err := connectTCPWorldCtx(500*time.Millisecond, 2, func(o *TCPOptions) {
		if o.Rank == 1 {
			o.Secret = []byte("other")
		}
	})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "authentication") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
	checkNoLeaks(t)
}

func connectTCPWorldCtx(d time.Duration, n int, tweak func(*TCPOptions)) ([]*TCP, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	store := rendezvous.NewMemStore()
	eps := make([]*TCP, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			o := TCPOptions{Rank: r, Size: n}
			tweak(&o)
			eps[r], errs[r] = ConnectTCP(ctx, store, o)
		})
	}
	wg.Wait()
	return eps, errors.Join(errs...)
}

func tcpWorld(t *testing.T, n int, cfg worldConfig) []*TCP {
	t.Helper()
	eps := buildTCP(t, n, cfg)
	tcps := make([]*TCP, n)
	for i, e := range eps {
		tcps[i] = e.(*TCP)
	}
	return tcps
}

// writeRaw writes bytes on the connection from e to peer, bypassing framing.
func writeRaw(t *testing.T, e *TCP, peer int, b []byte) {
	t.Helper()
	c := e.conns[peer]
	c.writeLock <- struct{}{}
	defer func() { <-c.writeLock }()
	if _, err := c.conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRecvCancelWhileReading: a receive whose message stops arriving
// partway (its sender's link died: the connection stays open and silent,
// as it does for many minutes after a cable is pulled) returns as soon as
// its ctx ends or its endpoint aborts. That holds whether the reader was
// writing the message into the receive's buffer (posted first) or still
// collecting it aside (the receive claimed it while it arrived), and
// wherever the sender stopped: inside a fragment, between two, or inside
// a header. The reader moves the bytes aside and reads on: once the rest
// comes, the message arrives whole.
func TestRecvCancelWhileReading(t *testing.T) {
	const frag, n = 16 << 10, 64 << 10
	h := Header{Comm: 1, Seq: 1, Sig: sig(2)}
	want := payload(9, n)
	var stream []byte // the message as the sender writes it
	for off := 0; off < n; off += frag {
		stream = append(stream, encodeFrame(frameHeader{typ: frameData, h: h, total: n, offset: uint64(off), fragLen: frag})...)
		stream = append(stream, want[off:off+frag]...)
	}
	cuts := map[string]int{
		"inside a fragment": headerSize + frag/2,
		"between fragments": headerSize + frag,
		"inside a header":   2*headerSize + frag - 7,
	}
	for _, posted := range []string{"posted first", "claimed in flight"} {
		for cutName, cut := range cuts {
			for _, end := range []string{"ctx ends", "endpoint aborts"} {
				t.Run(posted+"/"+cutName+"/"+end, func(t *testing.T) {
					eps := tcpWorld(t, 2, worldConfig{maxFragment: frag})
					ctx := tctx(t)
					mb := eps[1].mb
					count := func(f func() int) func() bool {
						return func() bool { mb.mu.Lock(); defer mb.mu.Unlock(); return f() == 1 }
					}
					cctx, cancel := context.WithCancel(ctx)
					defer cancel()
					var ch <-chan recvResult
					if posted == "posted first" {
						ch = goRecv(cctx, eps[1], 0, h, make([]byte, n))
						waitFor(t, "receive posted", count(func() int { return len(mb.byKey) }))
						writeRaw(t, eps[0], 1, stream[:cut])
					} else {
						writeRaw(t, eps[0], 1, stream[:cut])
						waitFor(t, "message in flight", count(func() int { return len(mb.inflight) }))
						ch = goRecv(cctx, eps[1], 0, h, make([]byte, n))
					}
					waitFor(t, "receive claimed", count(func() int { return len(mb.claimed) }))
					time.Sleep(10 * time.Millisecond) // the reader waits for more
					if end == "ctx ends" {
						cancel()
					} else {
						eps[1].Abort(errors.New("test abort"))
					}
					r := waitResult(t, ch, 2*time.Second)
					if end == "endpoint aborts" {
						if !errors.Is(r.err, ErrAborted) {
							t.Fatalf("got %v, want ErrAborted", r.err)
						}
						return
					}
					if !errors.Is(r.err, context.Canceled) {
						t.Fatalf("got %v, want context.Canceled", r.err)
					}
					writeRaw(t, eps[0], 1, stream[cut:])
					buf := make([]byte, n)
					if _, err := eps[1].Recv(ctx, 0, h, buf); err != nil || !bytes.Equal(buf, want) {
						t.Fatalf("message after cancel: %v (whole: %v)", err, bytes.Equal(buf, want))
					}
				})
			}
		}
	}
}

// TestBadFrameKillsConnection: a malformed header ends that connection and
// the receiver aborts naming the sender.
func TestBadFrameKillsConnection(t *testing.T) {
	bad := map[string][]byte{
		"magic":          []byte(strings.Repeat("x", headerSize)),
		"absurd length":  encodeFrame(frameHeader{typ: frameData, total: 1 << 41, fragLen: 16}),
		"fragment > max": encodeFrame(frameHeader{typ: frameData, total: 1 << 20, fragLen: 4097}),
		"bad version":    append([]byte{0x47, 0x43, 0x4f, 0x4d, 9}, make([]byte, headerSize-5)...),
	}
	for name, b := range bad {
		t.Run(name, func(t *testing.T) {
			eps := tcpWorld(t, 2, worldConfig{maxFragment: 4096})
			ctx := tctx(t)
			ch := goRecv(ctx, eps[1], 0, Header{Sig: sig(1)}, make([]byte, 1))
			time.Sleep(5 * time.Millisecond)
			writeRaw(t, eps[0], 1, b)
			r := waitResult(t, ch, 5*time.Second)
			var pe *PeerError
			if !errors.Is(r.err, ErrPeerLost) || !errors.As(r.err, &pe) || pe.Peer != 0 || !strings.Contains(r.err.Error(), "bad frame header") {
				t.Fatalf("got %v", r.err)
			}
			t.Log(r.err)
			// The sender sees its connection close and aborts too.
			if _, err := eps[0].Recv(ctx, 1, Header{Sig: sig(1)}, make([]byte, 1)); !errors.Is(err, ErrPeerLost) {
				t.Fatalf("sender: %v", err)
			}
		})
	}
}

// TestKillConn cuts the connection between ranks 0 and 1 as a network
// failure would. That is a loss only for operations that need it: receives
// from rank 2 go on, while a receive of 0 from 1 (and of 1 from 0) fails
// naming the other rank, and aborts that endpoint.
func TestKillConn(t *testing.T) {
	eps := tcpWorld(t, 3, worldConfig{})
	ctx := tctx(t)
	h := Header{Seq: 1, Sig: sig(1)}
	ch0 := goRecv(ctx, eps[0], 2, h, make([]byte, 1))
	ch1 := goRecv(ctx, eps[1], 2, h, make([]byte, 1))
	time.Sleep(5 * time.Millisecond)
	if err := eps[0].KillConn(1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // both ends see the connection end
	for r := range 2 {
		if err := eps[2].Send(ctx, r, h, []byte{byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range []<-chan recvResult{ch0, ch1} {
		if r := waitResult(t, ch, 5*time.Second); r.err != nil {
			t.Fatalf("rank %d: receive from rank 2: %v", i, r.err)
		}
	}
	for i := range 2 {
		_, err := eps[i].Recv(ctx, 1-i, h, make([]byte, 1))
		var pe *PeerError
		if !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) || !errors.As(err, &pe) || pe.Peer != 1-i {
			t.Fatalf("rank %d: receive from rank %d: got %v", i, 1-i, err)
		}
	}
	// Rank 2 is unaffected until told.
	if err := eps[2].Send(ctx, 1, h, []byte{1}); err != nil {
		t.Fatal(err)
	}
}

func TestCloseEndsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, abort := range []bool{false, true} {
		eps, err := connectTCPWorld(4, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := tctx(t)
		// Leave receives pending and messages queued.
		go eps[0].Recv(ctx, 1, Header{Seq: 1, Sig: sig(1)}, make([]byte, 1))
		eps[2].Send(ctx, 3, Header{Seq: 2, Sig: sig(1)}, make([]byte, 1<<20))
		if abort {
			eps[1].Abort(errors.New("test abort"))
		}
		var wg sync.WaitGroup
		start := time.Now()
		for _, e := range eps {
			wg.Go(func() { e.Close() })
		}
		wg.Wait()
		t.Logf("abort=%v: Close took %v", abort, time.Since(start))
		checkNoLeaks(t)
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines before, %d after", before, n)
	}
}

// TestLateRecvTakesOverMessage: a receive posted while its message is
// arriving unexpected takes it over and gets it whole; a receive posted
// later than another that wants the same message does not jump the queue.
func TestLateRecvTakesOverMessage(t *testing.T) {
	eps := tcpWorld(t, 2, worldConfig{maxFragment: 4096})
	ctx := tctx(t)
	mb := eps[1].mb
	frame := func(h Header, want []byte, off int) []byte {
		b := encodeFrame(frameHeader{typ: frameData, h: h, total: uint64(len(want)), offset: uint64(off), fragLen: 4096})
		return append(b, want[off:off+4096]...)
	}
	inflight := func(h Header) *inflightMsg {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		if l := mb.inflight[keyOf(&h)]; len(l) == 1 {
			return l[0]
		}
		return nil
	}

	h := Header{Comm: 1, Seq: 1, Sig: sig(2)}
	want := payload(3, 8192)
	writeRaw(t, eps[0], 1, frame(h, want, 0))
	waitFor(t, "message in flight", func() bool { return inflight(h) != nil })
	buf := make([]byte, 8192)
	ch := goRecv(ctx, eps[1], 0, h, buf)
	waitFor(t, "handoff", func() bool { return inflight(h) == nil || inflight(h).handoff.Load() })
	writeRaw(t, eps[0], 1, frame(h, want, 4096))
	if r := waitResult(t, ch, 5*time.Second); r.err != nil || !bytes.Equal(buf, want) {
		t.Fatalf("handed-off receive: %v", r.err)
	}

	// A receive that cannot take the message (wrong length) was posted
	// first: the later one must wait, and the first fails at delivery.
	h.Seq = 2
	writeRaw(t, eps[0], 1, frame(h, want, 0))
	waitFor(t, "message in flight", func() bool { return inflight(h) != nil })
	short := goRecv(ctx, eps[1], 0, h, make([]byte, 100))
	waitFor(t, "first receive posted", func() bool {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		return mb.byKey[keyOf(&h)] != nil
	})
	late := goRecv(ctx, eps[1], 0, h, make([]byte, 8192))
	time.Sleep(10 * time.Millisecond)
	if im := inflight(h); im == nil || im.handoff.Load() {
		t.Fatal("later receive took the message ahead of an earlier one")
	}
	writeRaw(t, eps[0], 1, frame(h, want, 4096))
	if r := waitResult(t, short, 5*time.Second); !errors.Is(r.err, ErrLength) {
		t.Fatalf("first receive: %v", r.err)
	}
	if err := eps[0].Send(ctx, 1, h, want); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, late, 5*time.Second); r.err != nil {
		t.Fatalf("later receive: %v", r.err)
	}
}

// pipeTCP returns rank 0 of a two-rank TCP endpoint whose connection to
// rank 1 is a synchronous in-memory pipe, and rank 1's raw end of it.
func pipeTCP(t *testing.T) (*TCP, net.Conn) {
	t.Helper()
	return pipeTCPClosing(t, 100*time.Millisecond)
}

// pipeTCPClosing is pipeTCP with the close timeout closeWait.
func pipeTCPClosing(t *testing.T, closeWait time.Duration) (*TCP, net.Conn) {
	t.Helper()
	acc, dial := net.Pipe()
	hcA := &handshakeConfig{rank: 0, size: 2, job: jobID("pipe"), maxFragment: 1 << 20}
	hcD := &handshakeConfig{rank: 1, size: 2, job: jobID("pipe"), maxFragment: 1 << 20}
	dialErr := make(chan error, 1)
	go func() {
		_, err := hcD.dialHandshake(dial, 0)
		dialErr <- err
	}()
	_, frag, err := hcA.acceptHandshake(acc)
	if err == nil {
		err = sendAck(acc)
	}
	if err2 := <-dialErr; err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	e := newTCP(0, 2, 1<<20, closeWait, []net.Conn{nil, acc}, []int{0, frag})
	t.Cleanup(func() {
		dial.Close()
		e.Close()
		checkNoLeaks(t)
	})
	return e, dial
}

// TestSendCancel: a send blocked on a peer that does not read returns
// ctx's error; if nothing was written the connection stays usable, and if
// part of the message was, the connection is closed and the endpoint
// aborts.
func TestSendCancel(t *testing.T) {
	e, peer := pipeTCP(t)
	h := Header{Seq: 1, Sig: sig(1)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.Send(ctx, 1, h, make([]byte, 1000)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unwritten send: %v", err)
	}
	if err := e.mb.failed(); err != nil {
		t.Fatalf("endpoint failed after a clean cancel: %v", err)
	}
	// Now the peer reads part of the message and stalls.
	go io.ReadFull(peer, make([]byte, headerSize+10))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	err := e.Send(ctx2, 1, h, make([]byte, 1000))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("half-written send: %v", err)
	}
	t.Log(err)
	if err := e.mb.failed(); !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) {
		t.Fatalf("endpoint after a half-written send: %v", err)
	}
}

// TestAbortDoesNotWaitForSilentPeer: Abort does not wait the close
// timeout for a peer that reads nothing (dead, stuck, or behind a dead
// link, whose socket is full), since the error of the operation that
// aborts is due at once; the frame is still written in the background
// until the close timeout, and reaches the peer if it reads again.
func TestAbortDoesNotWaitForSilentPeer(t *testing.T) {
	const closeWait = 3 * time.Second
	e, peer := pipeTCPClosing(t, closeWait) // a pipe takes no byte its reader does not read
	start := time.Now()
	e.Abort(errors.New("test abort"))
	if took := time.Since(start); took > closeWait/3 {
		t.Fatalf("Abort took %v for a peer that reads nothing (close timeout %v)", took, closeWait)
	}
	readAbortFrame(t, peer)
}

// TestAbortDoesNotWaitForBlockedWrite: nor does Abort wait the close
// timeout for a write that holds the connection to a peer that reads
// nothing (a message, or a waiting notice, blocked on a full socket); the
// frame follows it.
func TestAbortDoesNotWaitForBlockedWrite(t *testing.T) {
	const closeWait = 3 * time.Second
	e, peer := pipeTCPClosing(t, closeWait)
	c := e.conns[1]
	c.writeLock <- struct{}{} // a write blocked on the peer holds the connection
	start := time.Now()
	e.Abort(errors.New("test abort"))
	if took := time.Since(start); took > closeWait/3 {
		t.Fatalf("Abort took %v behind a blocked write (close timeout %v)", took, closeWait)
	}
	<-c.writeLock // the write is done
	readAbortFrame(t, peer)
}

// readAbortFrame reads an abort frame saying "test abort" from the raw
// end of a connection.
func readAbortFrame(t *testing.T, peer net.Conn) {
	t.Helper()
	hb := make([]byte, headerSize)
	if _, err := io.ReadFull(peer, hb); err != nil {
		t.Fatal(err)
	}
	fh, err := decodeFrameHeader(hb, 1<<20)
	if err != nil || fh.typ != frameAbort {
		t.Fatalf("peer read %v (%v), want an abort frame", fh.typ, err)
	}
	reason := make([]byte, fh.fragLen)
	if _, err := io.ReadFull(peer, reason); err != nil || !strings.Contains(string(reason), "test abort") {
		t.Fatalf("abort reason %q: %v", reason, err)
	}
}

func TestHosts(t *testing.T) {
	cases := []struct {
		o               TCPOptions
		bind, advertise string
	}{
		{TCPOptions{}, "127.0.0.1", "127.0.0.1"},
		{TCPOptions{MasterHost: "localhost"}, "127.0.0.1", "127.0.0.1"},
		{TCPOptions{MasterHost: "127.0.0.5"}, "127.0.0.1", "127.0.0.1"},
		{TCPOptions{ListenHost: "127.0.0.2"}, "127.0.0.2", "127.0.0.2"},
		{TCPOptions{ListenHost: "0.0.0.0", AdvertiseHost: "node7"}, "0.0.0.0", "node7"},
		{TCPOptions{ListenHost: "0.0.0.0", MasterHost: "127.0.0.1"}, "0.0.0.0", "127.0.0.1"},
	}
	for _, tc := range cases {
		bind, adv, err := tc.o.hosts(context.Background())
		if err != nil || bind != tc.bind || adv != tc.advertise {
			t.Errorf("%+v: got %q %q %v, want %q %q", tc.o, bind, adv, err, tc.bind, tc.advertise)
		}
	}
	// A remote master: bind and advertise the address of the route to it
	// (TestReachableAddress covers the rules with a simulated network).
	bind, adv, err := (&TCPOptions{MasterHost: "192.0.2.1"}).hosts(context.Background())
	if err != nil {
		t.Skipf("no route to a remote address here: %v", err)
	}
	if ip := net.ParseIP(adv); bind != adv || ip == nil || ip.IsLoopback() {
		t.Errorf("remote master: bind %q advertise %q", bind, adv)
	}
}

// TestTCPRecvSink: over TCP, RecvSink hands the sink a message posted for
// as the connection's reader takes it in, in pieces of at most the
// reader's buffer, and one that arrived first whole; in order, without
// writing buf; Hybrid does the same for a peer it reaches over TCP.
func TestTCPRecvSink(t *testing.T) {
	const n = 3*readBufSize + 1234
	check := func(t *testing.T, send, recv Endpoint, sr SinkReceiver) {
		ctx := tctx(t)
		h := Header{Comm: 1, Seq: 1, Sig: sig(n)}
		var l sinkLog
		buf := make([]byte, n)
		ch := make(chan error, 1)
		go func() { _, err := sr.RecvSink(ctx, 0, h, buf, l.sink); ch <- err }()
		time.Sleep(20 * time.Millisecond) // posted before the message comes
		if err := send.Send(ctx, 1, h, payload(1, n)); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		l.check(t, payload(1, n), buf, n/readBufSize+1)

		hq := Header{Comm: 1, Seq: 2, Sig: sig(100)}
		if err := send.Send(ctx, 1, hq, payload(2, 100)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // queued before the receive
		var lq sinkLog
		bq := make([]byte, 100)
		if _, err := sr.RecvSink(ctx, 0, hq, bq, lq.sink); err != nil {
			t.Fatal(err)
		}
		lq.check(t, payload(2, 100), bq, 1)
		if _, err := sr.RecvSink(ctx, AnySource, hq, bq, lq.sink); err == nil {
			t.Fatal("RecvSink from AnySource succeeded")
		}
	}
	t.Run("tcp", func(t *testing.T) {
		ws, err := connectTCPWorld(2, func(o *TCPOptions) { o.Prefix = t.Name() })
		eps := asWorld(t, ws, err)
		check(t, eps[0], eps[1], ws[1])
	})
	t.Run("hybrid", func(t *testing.T) {
		eps := buildHybridWorld(t, 2, worldConfig{}, TransportTCP, func(int) string { return "one-host" })
		check(t, eps[0], eps[1], eps[1].(SinkReceiver))
	})
}
