package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

func startServer(t *testing.T) *TCPStoreServer {
	t.Helper()
	srv, err := ListenTCPStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func rawConn(t *testing.T, srv *TCPStoreServer) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t *testing.T, c net.Conn, wire ...[]byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for _, b := range wire {
		if _, err := c.Write(b); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

func encode(t *testing.T, d dialect, req request) []byte {
	t.Helper()
	b, err := appendRequest(nil, d, req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func expectReply(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading a %d-byte reply: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("reply %x, want %x", got, want)
	}
}

func expectNothing(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [1]byte
	if n, err := c.Read(b[:]); n > 0 || !isTimeout(err) {
		t.Fatalf("unexpected reply %x, %v", b[:n], err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// expectClosed reads until the server closes c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("server did not close the connection: %v", err)
	}
}

// TestServerTorch113Golden replays the requests torch 1.13's client sent to
// torch 1.13's server and expects the answers that server gave.
func TestServerTorch113Golden(t *testing.T) {
	srv := startServer(t)
	c := rawConn(t, srv)
	steps := []struct{ req, reply string }{
		{"00 0300000000000000 2f6162 0200000000000000 7879", ""},                                            // set("ab", b"xy")
		{"05 0100000000000000 0300000000000000 2f6162", "00"},                                               // wait: STOP_WAITING
		{"02 0300000000000000 2f6162", "0200000000000000 7879"},                                             // get
		{"03 0200000000000000 2f6e 0500000000000000", "0500000000000000"},                                   // add("n", 5)
		{"01 0300000000000000 2f6162 0200000000000000 7879 0200000000000000 7a7a", "0200000000000000 7a7a"}, // compare_set
		{"06", "0200000000000000"},                                                                          // num_keys
		{"08 0300000000000000 2f6162", "0100000000000000"},                                                  // delete_key
		{"01 0600000000000000 2f6e6f6b6579 0000000000000000 0100000000000000 76", "0100000000000000 76"},
		{"01 0700000000000000 2f6e6f6b657932 0100000000000000 65 0100000000000000 76", "0100000000000000 65"},
		{"04 0200000000000000 0300000000000000 2f6162 0200000000000000 2f6e", "01"}, // check: NOT_READY
		{"04 0100000000000000 0200000000000000 2f6e", "00"},                         // check: READY
	}
	for _, s := range steps {
		send(t, c, unhex(t, s.req))
		if s.reply == "" {
			expectNothing(t, c)
		} else {
			expectReply(t, c, unhex(t, s.reply))
		}
	}
}

// TestClientSendsTorchBytes checks, against a fake server, that our client
// sends what torch 1.13's client sends.
func TestClientSendsTorchBytes(t *testing.T) {
	t.Setenv(envTorchStore, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type exchange struct{ want, reply string }
	script := []exchange{
		{"04 0000000000000000", "00"}, // the probe: CHECK of no keys, READY from torch 1.x
		{"00 0300000000000000 2f6162 0200000000000000 7879", ""},
		{"04 0000000000000000", "00"}, // Set's acknowledgement: CHECK of no keys
		{"03 0200000000000000 2f6e 0500000000000000", "0500000000000000"},
		{"01 0300000000000000 2f6162 0200000000000000 7879 0200000000000000 7a7a", "0200000000000000 7a7a"},
		{"06", "0200000000000000"},
		{"08 0300000000000000 2f6162", "0100000000000000"},
	}
	serverErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		for _, x := range script {
			want := unhex(t, x.want)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				serverErr <- err
				return
			}
			if !bytes.Equal(got, want) {
				serverErr <- errors.New("client sent " + hex.EncodeToString(got) + ", torch sends " + hex.EncodeToString(want))
				return
			}
			if _, err := c.Write(unhex(t, x.reply)); err != nil {
				serverErr <- err
				return
			}
		}
		serverErr <- nil
	}()
	ctx := testCtx(t)
	st, err := DialTCPStore(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Set(ctx, "ab", []byte("xy")); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Add(ctx, "n", 5); err != nil || n != 5 {
		t.Fatalf("Add = %d, %v", n, err)
	}
	if v, err := st.CompareAndSet(ctx, "ab", []byte("xy"), []byte("zz")); err != nil || string(v) != "zz" {
		t.Fatalf("CompareAndSet = %q, %v", v, err)
	}
	if n, err := st.NumKeys(ctx); err != nil || n != 2 {
		t.Fatalf("NumKeys = %d, %v", n, err)
	}
	if ok, err := st.Delete(ctx, "ab"); err != nil || !ok {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if err := <-serverErr; err != nil {
		t.Fatal(err)
	}
}

func TestClientRejectsBadReplies(t *testing.T) {
	t.Setenv(envTorchStore, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.ReadFull(c, make([]byte, 9)) // the probe: CHECK of no keys
				c.Write([]byte{checkReady})
				var b [1]byte
				c.Read(b[:])
				c.Write([]byte{7}) // neither READY nor NOT_READY, nor STOP_WAITING
				io.Copy(io.Discard, c)
			}()
		}
	}()
	ctx := testCtx(t)
	st, err := DialTCPStore(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Check(ctx, "k"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("Check with a bad reply: %v, want ErrProtocol", err)
	}
}

func TestServerTorch2Protocol(t *testing.T) {
	srv := startServer(t)
	d := dialectV2
	c := rawConn(t, srv)
	u64 := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	vec := func(s string) []byte { return append(u64(uint64(len(s))), s...) }

	send(t, c, encode(t, d, request{op: opValidate, word: validationMagic}))
	expectNothing(t, c)
	send(t, c, encode(t, d, request{op: opPing, word: 0xdeadbeef}))
	expectReply(t, c, unhex(t, "efbeadde"))

	send(t, c, encode(t, d, request{op: opMultiSet, keys: []string{"a", "b"}, values: [][]byte{[]byte("1"), []byte("22")}}))
	send(t, c, encode(t, d, request{op: opMultiGet, keys: []string{"b", "a"}}))
	expectReply(t, c, append(vec("22"), vec("1")...))

	send(t, c, encode(t, d, request{op: opAppend, keys: []string{"log"}, values: [][]byte{[]byte("x")}}))
	send(t, c, encode(t, d, request{op: opAppend, keys: []string{"log"}, values: [][]byte{[]byte("yz")}}))
	send(t, c, encode(t, d, request{op: opGet, keys: []string{"log"}}))
	expectReply(t, c, vec("xyz"))

	// A wait that times out client-side is cancelled.
	send(t, c, encode(t, d, request{op: opWait, keys: []string{"missing"}}))
	expectNothing(t, c)
	send(t, c, encode(t, d, request{op: opCancelWait}))
	expectReply(t, c, []byte{waitCanceled})
	// The cancelled wait is forgotten: setting the key sends nothing.
	other := rawConn(t, srv)
	send(t, other, encode(t, d, request{op: opValidate, word: validationMagic}),
		encode(t, d, request{op: opSet, keys: []string{"missing"}, values: [][]byte{nil}}))
	expectNothing(t, c)

	// A wait answered just before the cancel crosses it: STOP_WAITING, then
	// WAIT_CANCELED, as torch's client expects.
	send(t, c, encode(t, d, request{op: opWait, keys: []string{"later"}}))
	send(t, other, encode(t, d, request{op: opSet, keys: []string{"later"}, values: [][]byte{nil}}))
	expectReply(t, c, []byte{waitStop})
	send(t, c, encode(t, d, request{op: opCancelWait}))
	expectReply(t, c, []byte{waitCanceled})

	// A connection that skips VALIDATE is a 1.x one; one that repeats it
	// is dropped.
	send(t, c, encode(t, d, request{op: opValidate, word: validationMagic}))
	expectClosed(t, c)
}

func TestServerWaitSemantics(t *testing.T) {
	srv := startServer(t)
	c := rawConn(t, srv)
	setter := rawConn(t, srv)
	d := dialectV1
	set := func(k string) {
		send(t, setter, encode(t, d, request{op: opSet, keys: []string{k}, values: [][]byte{[]byte("v")}}))
	}
	// WAIT on two keys answers once both are set, once.
	send(t, c, encode(t, d, request{op: opWait, keys: []string{"a", "b", "a"}}))
	set("a")
	expectNothing(t, c)
	set("b")
	expectReply(t, c, []byte{waitStop})
	set("a")
	expectNothing(t, c)
	// The connection serves requests after its wait ended.
	send(t, c, encode(t, d, request{op: opCheck, keys: []string{"a", "b"}}))
	expectReply(t, c, []byte{checkReady})
	// Only the missing keys are awaited.
	send(t, c, encode(t, d, request{op: opWait, keys: []string{"a", "c"}}))
	expectNothing(t, c)
	set("c")
	expectReply(t, c, []byte{waitStop})
}

// TestServerAbandonedWait: a torch 1.x client whose wait timed out keeps
// its connection and goes on (1.x has no CANCEL_WAIT). The server treats it
// as torch 1.13's does (TestTorchClientAbandonedWait checks the same
// against torch itself): the connection has one count of awaited keys,
// replaced by each WAIT that has to wait; every set of a registered key
// decrements it, and reaching zero sends STOP_WAITING.
func TestServerAbandonedWait(t *testing.T) {
	srv := startServer(t)
	c := rawConn(t, srv)
	setter := rawConn(t, srv)
	d := dialectV1
	wait := func(keys ...string) { send(t, c, encode(t, d, request{op: opWait, keys: keys})) }
	// set returns once the server has applied the SET (a CHECK of no keys
	// on the same connection is answered after it).
	set := func(k string) {
		t.Helper()
		send(t, setter, encode(t, d, request{op: opSet, keys: []string{k}, values: [][]byte{[]byte("v")}}),
			encode(t, d, request{op: opCheck}))
		expectReply(t, setter, []byte{checkReady})
	}
	check := func(keys ...string) { send(t, c, encode(t, d, request{op: opCheck, keys: keys})) }
	u64 := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

	// The case: a wait on "never" is abandoned, the next WAIT on
	// "late" is answered when "late" is set, and requests keep being served.
	wait("never")
	expectNothing(t, c)
	wait("late")
	expectNothing(t, c)
	set("late")
	expectReply(t, c, []byte{waitStop})
	send(t, c, encode(t, d, request{op: opAdd, keys: []string{"n"}, delta: 2}))
	expectReply(t, c, u64(2))
	// "never" appearing now takes the count below zero: nothing is sent.
	set("never")
	check("never")
	expectReply(t, c, []byte{checkReady})

	// A key of an abandoned wait that appears before the next WAIT owes
	// the connection a STOP_WAITING, sent ahead of the next answer.
	wait("gone")
	set("gone")
	check("gone")
	expectReply(t, c, []byte{waitStop, checkReady})
	// A WAIT whose keys all exist is answered at once and leaves the
	// count of an abandoned one alone.
	wait("x", "y")
	wait("never")
	expectReply(t, c, []byte{waitStop})
	set("x")
	expectNothing(t, c)
	set("y")
	expectReply(t, c, []byte{waitStop})

	// A connection closed while waiting disturbs no other.
	other := rawConn(t, srv)
	send(t, other, encode(t, d, request{op: opWait, keys: []string{"k"}}))
	other.Close()
	wait("k")
	set("k")
	expectReply(t, c, []byte{waitStop})
	send(t, setter, encode(t, d, request{op: opNumKeys}))
	expectReply(t, setter, u64(7)) // late, n, never, gone, x, y, k
}

func TestDialRetriesUntilServerAppears(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens at addr for now

	ctx := testCtx(t)
	type dialResult struct {
		st  *TCPStore
		err error
	}
	dialed := make(chan dialResult, 1)
	go func() {
		st, err := DialTCPStore(ctx, addr)
		dialed <- dialResult{st, err}
	}()
	notYet(t, dialed, "DialTCPStore with no server")
	time.Sleep(150 * time.Millisecond)
	srv, err := ListenTCPStore(addr)
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err)
	}
	defer srv.Close()
	r := within(t, dialed, 5*time.Second, "DialTCPStore once the server is up")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.st.Close()
	mustSet(t, r.st, "k", "v")
	wantValue(t, r.st, "k", "v")
}

func TestDialErrorNamesMaster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = NewTCPStore(ctx, addr, false)
	if time.Since(start) > 3*time.Second {
		t.Fatalf("DialTCPStore took %v past its deadline", time.Since(start))
	}
	if !errors.Is(err, ErrMasterUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrMasterUnreachable and DeadlineExceeded", err)
	}
	for _, want := range []string{addr, "MASTER_ADDR", "MASTER_PORT", "rank 0", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	if _, err := DialTCPStore(ctx, "no-port"); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("DialTCPStore(no-port) = %v, want an error about host:port", err)
	}
	if _, err := ListenTCPStore("256.0.0.1:0"); err == nil {
		t.Error("ListenTCPStore on a bad address succeeded")
	}
}

func TestServerCloseUnblocksWaitingClients(t *testing.T) {
	srv, err := ListenTCPStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	st, err := DialTCPStore(ctx, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	get := asyncGet(ctx, st, "never")
	wait := asyncWait(ctx, st, "never", "either")
	raw, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	send(t, raw, encode(t, dialectV1, request{op: opWait, keys: []string{"/never"}}))
	notYet(t, get, "Get")

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	if err := within(t, closed, 5*time.Second, "server Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := within(t, get, 5*time.Second, "Get across server Close"); !errors.Is(r.err, ErrConnectionLost) {
		t.Fatalf("Get: %v, want ErrConnectionLost", r.err)
	}
	if err := within(t, wait, 5*time.Second, "Wait across server Close"); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("Wait: %v, want ErrConnectionLost", err)
	}
	expectClosed(t, raw)
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Later calls fail fast: nothing accepts connections any more.
	if err := st.Set(ctx, "k", nil); err == nil {
		t.Fatal("Set succeeded with the server gone")
	}
}

// TestServerSurvivesGarbage sends malformed, truncated and oversized
// requests on their own connections; each is dropped while a well-behaved
// client keeps working, and the server does not allocate what lengths claim.
func TestServerSurvivesGarbage(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, err := ListenTCPStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	good, err := DialTCPStore(ctx, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	u64 := func(n uint64) string { return hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, n)) }
	random := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	random[0] = 0x42 // an unknown query whatever the dialect
	cases := []struct {
		name string
		wire []byte
	}{
		{"random bytes", random},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"unknown query", unhex(t, "09")},
		{"huge key length", unhex(t, "02"+u64(1<<40))},
		{"key over limit", unhex(t, "02"+u64(MaxKeyLen+1))},
		{"value over limit", unhex(t, "00"+u64(1)+"61"+u64(MaxValueLen+1))},
		{"absurd key count", unhex(t, "04"+u64(1<<62))},
		{"key count over limit", unhex(t, "05"+u64(MaxKeys+1))},
		{"get of a missing key", unhex(t, "02"+u64(8)+hex.EncodeToString([]byte("/missing")))},
		{"watch_key", unhex(t, "07"+u64(2)+"2f6b")},
		{"add to a non-counter", append(
			encode(t, dialectV1, request{op: opSet, keys: []string{"txt"}, values: [][]byte{[]byte("abc")}}),
			encode(t, dialectV1, request{op: opAdd, keys: []string{"txt"}, delta: 1})...)},
		{"2.x unknown query", unhex(t, "00cef7853c 0e")},
		{"2.x bad first query", unhex(t, "00cef7853c 00cef7853c")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConn(t, srv)
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write(tc.wire) // the server may close before reading everything
			expectClosed(t, c)
			mustSet(t, good, "after/"+tc.name, "ok")
			wantValue(t, good, "after/"+tc.name, "ok")
		})
	}

	t.Run("truncated requests", func(t *testing.T) {
		for _, wire := range []string{"00" + u64(10) + "616263", "05" + u64(2) + u64(1) + "61", "03" + u64(1) + "61 05", "00cef7"} {
			c := rawConn(t, srv)
			send(t, c, unhex(t, wire))
			c.(*net.TCPConn).CloseWrite()
			expectClosed(t, c)
		}
		mustSet(t, good, "k", "v")
		wantValue(t, good, "k", "v")
	})

	t.Run("stalled huge value", func(t *testing.T) {
		// Lengths just under the limits, then silence: the server must
		// not allocate what they announce.
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap := ms.HeapAlloc
		for range 8 {
			c := rawConn(t, srv)
			send(t, c, unhex(t, "00"+u64(1)+"61"+u64(MaxValueLen)+"00"))
		}
		time.Sleep(100 * time.Millisecond)
		mustSet(t, good, "k2", "v")
		wantValue(t, good, "k2", "v")
		runtime.ReadMemStats(&ms)
		if grown := int64(ms.HeapAlloc) - int64(heap); grown > 64<<20 {
			t.Fatalf("heap grew by %d MiB for 8 stalled 1 GiB values", grown>>20)
		}
	})

	good.Close()
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	within(t, closed, 5*time.Second, "server Close with stalled connections")
	// Every goroutine of the server and the client has ended.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestClientSurvivesRedial: when the main connection breaks (ctx ended
// mid-request, or the server dropped it), the next request dials again.
func TestClientSurvivesRedial(t *testing.T) {
	srv := startServer(t)
	ctx := testCtx(t)
	st, err := DialTCPStore(ctx, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustSet(t, st, "k", "v")
	// Break the main connection from the server side.
	srv.mu.Lock()
	for c := range srv.conns {
		c.nc.Close()
	}
	srv.mu.Unlock()
	if _, err := st.NumKeys(ctx); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("NumKeys on a broken connection: %v, want ErrConnectionLost", err)
	}
	wantValue(t, st, "k", "v")
	if st.Addr() != srv.Addr().String() {
		t.Fatalf("Addr() = %s, want %s", st.Addr(), srv.Addr())
	}
}
