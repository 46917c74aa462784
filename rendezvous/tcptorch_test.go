package rendezvous

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocomm/comm/env"
)

// Torch 2.x cannot be installed here (Debian ships 1.13), so the 2.x side
// is checked two ways: against golden bytes written by hand from torch's
// own source (pytorch/pytorch, torch/csrc/distributed/c10d; see
// TestTorch2ClientGolden), and against our server behind a front that
// refuses 1.x connections the way torch 2.x's two servers do.

// frontMode is which torch server a front stands in for.
type frontMode int

const (
	// frontTorch1 closes a connection that opens with VALIDATE: torch
	// 1.x reads VALIDATE+PING as a SET with a key length over 2^63 and
	// fails (see pingNonce).
	frontTorch1 frontMode = iota
	// frontTorch2Classic closes a connection that does not open with
	// VALIDATE, as TCPStoreBackend.cpp's query does ("Miscellaneous
	// client without VALIDATE query is detected").
	frontTorch2Classic
	// frontTorch2LibUV leaves such a connection unanswered, as
	// TCPStoreLibUvBackend.cpp's UvClient::processBuf does (it returns
	// without a reply and without closing).
	frontTorch2LibUV
)

func (m frontMode) String() string {
	return [...]string{"torch-1.x", "torch-2.x-classic", "torch-2.x-libuv"}[m]
}

// front is a TCP proxy to one of our servers that admits only the
// connections the torch server of its mode would serve: our server in
// 1.x-only or 2.x-only mode.
type front struct {
	ln       net.Listener
	backend  string
	mode     frontMode
	refused  atomic.Int64 // connections refused
	accepted atomic.Int64 // connections passed on to the backend
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startFront(t testing.TB, backend string, mode frontMode) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{ln: ln, backend: backend, mode: mode}
	knownProtocols.Delete(f.Addr()) // a port reused from an earlier test's server
	f.wg.Add(1)
	go f.acceptLoop()
	t.Cleanup(f.close)
	return f
}

func (f *front) Addr() string { return f.ln.Addr().String() }

func (f *front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false // closed
	}
	f.conns = append(f.conns, c)
	return true
}

func (f *front) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *front) acceptLoop() {
	defer f.wg.Done()
	f.mu.Lock()
	f.conns = []net.Conn{}
	f.mu.Unlock()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.serve(c)
		}()
	}
}

func (f *front) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	d, err := detectDialect(br)
	if err != nil {
		return
	}
	if (d == dialectV2) == (f.mode == frontTorch1) {
		f.refused.Add(1)
		if f.mode == frontTorch2LibUV {
			io.Copy(io.Discard, br) // silent until the client hangs up
		}
		return
	}
	f.accepted.Add(1)
	b, err := net.Dial("tcp", f.backend)
	if err != nil {
		return
	}
	if !f.track(b) {
		b.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(b, br)
		b.Close()
		close(done)
	}()
	io.Copy(c, b)
	c.Close()
	<-done
}

// torchServer is our server behind a front of mode m.
func torchServer(t testing.TB, m frontMode) *front {
	t.Helper()
	srv, err := ListenTCPStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return startFront(t, srv.Addr().String(), m)
}

func TestEnvTorchStoreName(t *testing.T) {
	if env.EnvTorchStore != envTorchStore {
		t.Fatalf("env.EnvTorchStore = %q, rendezvous reads %q", env.EnvTorchStore, envTorchStore)
	}
}

// exerciseStore runs a short job on two clients of one store: the
// operations every rank uses, MULTI_SET and MULTI_GET, and a wait ended by
// its ctx after which the store still works.
func exerciseStore(t *testing.T, a, b *TCPStore) {
	t.Helper()
	ctx := testCtx(t)
	late := asyncGet(ctx, b, "late")
	notYet(t, late, "Get(late)")
	mustSet(t, a, "late", "v")
	if r := within(t, late, 10*time.Second, "Get(late)"); r.err != nil || string(r.v) != "v" {
		t.Fatalf("Get(late) = %q, %v", r.v, r.err)
	}
	if n, err := b.Add(ctx, "n", 2); err != nil || n != 2 {
		t.Fatalf("Add = %d, %v", n, err)
	}
	if err := a.MultiSet(ctx, []string{"m1", "m2", "m3"}, [][]byte{[]byte("1"), nil, []byte("333")}); err != nil {
		t.Fatal(err)
	}
	vs, err := b.MultiGet(ctx, "m3", "m1", "m2", "late")
	if err != nil || len(vs) != 4 || string(vs[0]) != "333" || string(vs[1]) != "1" || len(vs[2]) != 0 || string(vs[3]) != "v" {
		t.Fatalf("MultiGet = %q, %v", vs, err)
	}
	// MultiGet blocks until every key is there.
	multi := make(chan error, 1)
	go func() {
		vs, err := b.MultiGet(ctx, "m1", "m4")
		if err == nil && (len(vs) != 2 || string(vs[1]) != "4") {
			err = fmt.Errorf("MultiGet(m1, m4) = %q", vs)
		}
		multi <- err
	}()
	notYet(t, multi, "MultiGet(m1, m4)")
	mustSet(t, a, "m4", "4")
	if err := within(t, multi, 10*time.Second, "MultiGet(m1, m4)"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = b.Wait(short, "never")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(never) = %v, want a deadline error", err)
	}
	w := asyncWait(ctx, b, "after")
	notYet(t, w, "Wait(after)")
	mustSet(t, a, "after", "x")
	if err := within(t, w, 10*time.Second, "Wait(after)"); err != nil {
		t.Fatal(err)
	}
	if err := a.MultiSet(ctx, []string{"x"}, nil); err == nil || !strings.Contains(err.Error(), "1 keys but 0 values") {
		t.Fatalf("MultiSet with too few values: %v", err)
	}
}

// The probe finds the generation each server speaks: a torch 1.x server
// answers the probe, torch 2.x's classic server closes it, its libuv
// server stays silent; ours answers it. What it found is remembered for
// the address: a second store skips the probe.
func TestProbePicksGeneration(t *testing.T) {
	t.Setenv(envTorchStore, "")
	plain := startServer(t)
	knownProtocols.Delete(plain.Addr().String())
	for _, tc := range []struct {
		name    string
		addr    func() (string, *front)
		want    int
		refused int64
		slow    bool // the probe waits probeSilence
	}{
		{"torch-1.x", func() (string, *front) { f := torchServer(t, frontTorch1); return f.Addr(), f }, 1, 0, false},
		{"torch-2.x-classic", func() (string, *front) { f := torchServer(t, frontTorch2Classic); return f.Addr(), f }, 2, 1, false},
		{"torch-2.x-libuv", func() (string, *front) { f := torchServer(t, frontTorch2LibUV); return f.Addr(), f }, 2, 1, true},
		{"gocomm", func() (string, *front) { return plain.Addr().String(), nil }, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, f := tc.addr()
			ctx := testCtx(t)
			start := time.Now()
			a, err := DialTCPStore(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if took := time.Since(start); tc.slow && took < probeSilence {
				t.Errorf("the probe took %v: did not wait probeSilence (%v) for a 1.x answer", took, probeSilence)
			}
			if a.TorchProtocol() != tc.want {
				t.Fatalf("TorchProtocol() = %d, want %d", a.TorchProtocol(), tc.want)
			}
			b, err := DialTCPStore(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.TorchProtocol() != tc.want {
				t.Errorf("second store: protocol %d, want %d", b.TorchProtocol(), tc.want)
			}
			exerciseStore(t, a, b)
			if f != nil && f.refused.Load() != tc.refused {
				t.Errorf("%d connections refused, want %d (the first store's probe; the second store and every wait connection remember what it found)", f.refused.Load(), tc.refused)
			}
		})
	}
}

// GOCOMM_TORCH_STORE forces the generation: the right one works, the wrong
// one is a clear error at once, not a lost connection later or a hang.
func TestForcedGeneration(t *testing.T) {
	for _, tc := range []struct {
		value string
		mode  frontMode
		want  int
		err   []string
	}{
		{"1", frontTorch1, 1, nil},
		{"2", frontTorch2Classic, 2, nil},
		{" 2 ", frontTorch2LibUV, 2, nil},
		{"auto", frontTorch2LibUV, 2, nil},
		{"1", frontTorch2Classic, 0, []string{"GOCOMM_TORCH_STORE=1 forces torch 1.x", "closed the connection", "set GOCOMM_TORCH_STORE=2"}},
		{"2", frontTorch1, 0, []string{"GOCOMM_TORCH_STORE=2 forces torch 2.x", "closed the connection", "it is a torch 1.x server", "set GOCOMM_TORCH_STORE=1"}},
		{"3", frontTorch1, 0, []string{`GOCOMM_TORCH_STORE="3": want 1`, "or auto"}},
	} {
		t.Run(tc.value+"/"+tc.mode.String(), func(t *testing.T) {
			t.Setenv(envTorchStore, tc.value)
			f := torchServer(t, tc.mode)
			ctx := testCtx(t)
			start := time.Now()
			st, err := DialTCPStore(ctx, f.Addr())
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if st.TorchProtocol() != tc.want {
					t.Fatalf("TorchProtocol() = %d, want %d", st.TorchProtocol(), tc.want)
				}
				mustSet(t, st, "k", "v")
				wantValue(t, st, "k", "v")
				return
			}
			if err == nil {
				st.Close()
				t.Fatalf("dial succeeded with %s=%q against %v", envTorchStore, tc.value, tc.mode)
			}
			for _, s := range tc.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the mismatch took %v to report: retried instead of failing at once", took)
			}
		})
	}
}

// On torch 2.x, a wait whose ctx ended is withdrawn with CANCEL_WAIT and
// its connection serves the next wait; on 1.x (no CANCEL_WAIT) the
// connection is dropped and a new one dialed.
func TestCancelledWaitKeepsConnectionOn2x(t *testing.T) {
	for _, tc := range []struct {
		mode frontMode
		d    dialect
	}{
		{frontTorch2Classic, dialectV2},
		{frontTorch1, dialectV1},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			f := torchServer(t, tc.mode)
			ctx := testCtx(t)
			st, err := dialTCPStore(ctx, f.Addr(), tc.d)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			setter, err := dialTCPStore(ctx, f.Addr(), tc.d)
			if err != nil {
				t.Fatal(err)
			}
			defer setter.Close()
			idle := func() []*clientConn {
				st.mu.Lock()
				defer st.mu.Unlock()
				return append([]*clientConn(nil), st.idle...)
			}
			var kept *clientConn
			for i := range 3 {
				short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				err := st.Wait(short, fmt.Sprint("never", i))
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Wait = %v, want a deadline error", err)
				}
				conns := idle()
				if tc.d == dialectV1 {
					if len(conns) != 0 {
						t.Fatalf("1.x: %d idle wait connections after a cancelled wait, want 0 (dropped)", len(conns))
					}
					continue
				}
				if len(conns) != 1 || kept != nil && conns[0] != kept {
					t.Fatalf("2.x: idle wait connections %p after cancelled wait %d, want the same one each time", conns, i)
				}
				kept = conns[0]
			}
			w := asyncWait(ctx, st, "k")
			notYet(t, w, "Wait(k)")
			mustSet(t, setter, "k", "v")
			if err := within(t, w, 10*time.Second, "Wait(k)"); err != nil {
				t.Fatal(err)
			}
			if conns := idle(); tc.d == dialectV2 && (len(conns) != 1 || conns[0] != kept) {
				t.Errorf("2.x: the wait after the cancelled ones did not reuse their connection")
			}
		})
	}
}

// TestTorch2ClientGolden checks the bytes our client writes, and how it
// reads the replies, against torch 2.x's own source (pytorch/pytorch,
// torch/csrc/distributed/c10d, read at the commits README names), written
// down by hand:
//
//   - TCPStoreBackend.hpp: enum class QueryType : uint8_t { VALIDATE,
//     SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY,
//     APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT, PING, ... } so VALIDATE=00
//     SET=01 COMPARE_SET=02 GET=03 ADD=04 CHECK=05 WAIT=06 GETNUMKEYS=07
//     DELETE_KEY=08 MULTI_GET=0a MULTI_SET=0b CANCEL_WAIT=0c PING=0d;
//     validationMagicNumber = 0x3C85F7CE; CheckResponseType { READY,
//     NOT_READY } and WaitResponseType { STOP_WAITING, WAIT_CANCELED },
//     one byte each.
//   - TCPStore.cpp, SendBuffer: the query byte, then appendString /
//     appendBytes = uint64 length + bytes, appendValue<T> = T's bytes in
//     host order (little-endian on every platform torch ships).
//   - TCPStore.cpp, validate(): VALIDATE + uint32 magic, no answer;
//     ping(): PING + uint32 nonce, answered by the same uint32
//     (TCPStoreBackend.cpp pingHandler, TCPStoreLibUvBackend.cpp
//     parse_ping_command).
//   - TCPStore.cpp, check()/doWait(): CHECK or WAIT + uint64 count + keys;
//     a wait that timed out sends CANCEL_WAIT (no arguments) and reads
//     WAIT_CANCELED, after a STOP_WAITING that crossed it.
//   - TCPStore.cpp, multiGet(): MULTI_GET + uint64 count + keys, read as
//     count vectors (TCPStoreBackend.cpp multiGetHandler sends one per
//     key); multiSet(): MULTI_SET + int64 count + (key, value) pairs, no
//     answer (multiSetHandler).
//   - keys carry keyPrefix_ "/" (TCPStore.hpp), as in 1.x.
func TestTorch2ClientGolden(t *testing.T) {
	t.Setenv(envTorchStore, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	knownProtocols.Delete(ln.Addr().String())

	nonce := binary.LittleEndian.AppendUint32(nil, pingNonce)
	if nonce[2] != 0xff {
		t.Fatalf("PING nonce %x: byte 2 must be 0xff (see pingNonce)", nonce)
	}
	open := "00 cef7853c 0d " + hex.EncodeToString(nonce) // VALIDATE magic, PING nonce
	waitSent := make(chan struct{})
	type step struct {
		want, reply string
		after       chan struct{} // closed once want was read
	}
	scripts := [][]step{
		// The probe: torch 1.x's CHECK of no keys (1.x CHECK = 04), which
		// the classic 2.x server drops as a query other than VALIDATE.
		{{want: "04 0000000000000000", reply: "drop"}},
		// The main connection.
		{
			{want: open, reply: hex.EncodeToString(nonce)},
			// set("ab", "xy"), then the CHECK of no keys that acknowledges it
			{want: "01 0300000000000000 2f6162 0200000000000000 7879 05 0000000000000000", reply: "00"},
			// get("ab"): CHECK it, GET it
			{want: "05 0100000000000000 0300000000000000 2f6162", reply: "00"},
			{want: "03 0300000000000000 2f6162", reply: "0200000000000000 7879"},
			{want: "04 0200000000000000 2f6e 0500000000000000", reply: "0500000000000000"}, // add("n", 5)
			{want: "02 0300000000000000 2f6162 0200000000000000 7879 0200000000000000 7a7a", reply: "0200000000000000 7a7a"},
			{want: "07", reply: "0200000000000000"},                         // num_keys
			{want: "08 0300000000000000 2f6162", reply: "0100000000000000"}, // delete_key
			// multi_set(["a", "b"], ["1", "22"]) and its acknowledgement
			{want: "0b 0200000000000000 0200000000000000 2f61 0100000000000000 31 0200000000000000 2f62 0200000000000000 3232 05 0000000000000000", reply: "00"},
			// multi_get(["a", "b"]): CHECK them, MULTI_GET them
			{want: "05 0200000000000000 0200000000000000 2f61 0200000000000000 2f62", reply: "00"},
			{want: "0a 0200000000000000 0200000000000000 2f61 0200000000000000 2f62", reply: "0100000000000000 31 0200000000000000 3232"},
			// wait(["w"]) while w is missing: NOT_READY, then WAIT on a wait connection
			{want: "05 0100000000000000 0200000000000000 2f77", reply: "01"},
			// the next wait(["w"]), after the cancelled one
			{want: "05 0100000000000000 0200000000000000 2f77", reply: "01"},
			{want: "05 0100000000000000 0200000000000000 2f77", reply: "00"},
		},
		// The wait connection: opened like the main one; its first WAIT is
		// cancelled (the reply crossing the cancel: STOP_WAITING, then
		// WAIT_CANCELED), and it serves the next WAIT.
		{
			{want: open, reply: hex.EncodeToString(nonce)},
			{want: "06 0100000000000000 0200000000000000 2f77", reply: "", after: waitSent},
			{want: "0c", reply: "00 01"},
			{want: "06 0100000000000000 0200000000000000 2f77", reply: "00"},
		},
	}
	serverErr := make(chan error, len(scripts))
	go func() {
		for i, script := range scripts {
			c, err := ln.Accept()
			if err != nil {
				serverErr <- err
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				for _, s := range script {
					want := unhex(t, s.want)
					got := make([]byte, len(want))
					if _, err := io.ReadFull(c, got); err != nil {
						serverErr <- fmt.Errorf("connection %d: reading %x: %v", i, want, err)
						return
					}
					if !bytes.Equal(got, want) {
						serverErr <- fmt.Errorf("connection %d: client sent %x, torch 2.x sends %x", i, got, want)
						return
					}
					if s.reply == "drop" {
						serverErr <- nil
						return
					}
					if _, err := c.Write(unhex(t, s.reply)); err != nil {
						serverErr <- err
						return
					}
					if s.after != nil {
						close(s.after)
					}
				}
				serverErr <- nil
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
	if st.TorchProtocol() != 2 {
		t.Fatalf("TorchProtocol() = %d, want 2", st.TorchProtocol())
	}
	mustSet(t, st, "ab", "xy")
	wantValue(t, st, "ab", "xy")
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
	if err := st.MultiSet(ctx, []string{"a", "b"}, [][]byte{[]byte("1"), []byte("22")}); err != nil {
		t.Fatal(err)
	}
	if vs, err := st.MultiGet(ctx, "a", "b"); err != nil || len(vs) != 2 || string(vs[0]) != "1" || string(vs[1]) != "22" {
		t.Fatalf("MultiGet = %q, %v", vs, err)
	}
	// The wait is cancelled once the server holds it.
	waitCtx, cancel := context.WithCancel(ctx)
	go func() {
		<-waitSent
		cancel()
	}()
	err = st.Wait(waitCtx, "w")
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait(w) = %v, want a cancellation error", err)
	}
	if err := st.Wait(ctx, "w"); err != nil {
		t.Fatalf("Wait(w) after the cancelled one: %v", err)
	}
	for range scripts {
		if err := <-serverErr; err != nil {
			t.Fatal(err)
		}
	}
}

// A 2.x server that answers PING with another nonce, or CHECK with
// something else than READY, is no TCPStore server: a protocol error.
func TestTorch2ClientRejectsBadHandshake(t *testing.T) {
	t.Setenv(envTorchStore, "2")
	for _, tc := range []struct{ reply, want string }{
		{"01020304", "answered torch 2.x's PING"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		knownProtocols.Delete(ln.Addr().String())
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			io.ReadFull(c, make([]byte, 10)) // VALIDATE, PING
			c.Write(unhex(t, tc.reply))
			io.Copy(io.Discard, c)
		}()
		_, err = DialTCPStore(testCtx(t), ln.Addr().String())
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reply %s: %v, want ErrProtocol saying %q", tc.reply, err, tc.want)
		}
	}
}

func TestParseTorchStore(t *testing.T) {
	for in, want := range map[string]dialect{"": dialectProbe, "auto": dialectProbe, "AUTO": dialectProbe, "1": dialectV1, " 2": dialectV2} {
		if got, err := parseTorchStore(in); err != nil || got != want {
			t.Errorf("parseTorchStore(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"2.4", "v2", "torch2", "0"} {
		if _, err := parseTorchStore(in); err == nil || !strings.Contains(err.Error(), envTorchStore) {
			t.Errorf("parseTorchStore(%q) = %v, want an error naming %s", in, err, envTorchStore)
		}
	}
}

// For the tests of package rendezvous_test (torchrun_test.go).

// FrontMode is frontMode, for rendezvous_test.
type FrontMode = frontMode

// The torch 2.x servers a front stands in for, for rendezvous_test.
const (
	FrontTorch2Classic = frontTorch2Classic
	FrontTorch2LibUV   = frontTorch2LibUV
)

// TorchServer is torchServer, for rendezvous_test: our server behind a
// front that refuses 1.x connections as torch 2.x's server of mode m does.
func TorchServer(t testing.TB, m FrontMode) *front { return torchServer(t, m) }

// Refused returns how many connections the front refused.
func (f *front) Refused() int64 { return f.refused.Load() }

// Accepted returns how many connections the front passed on.
func (f *front) Accepted() int64 { return f.accepted.Load() }

// fakeStep is one exchange of a scripted fake server: read want (hex),
// then write reply (hex), close the connection ("close"), or do nothing
// until the client hangs up ("silent").
type fakeStep struct{ want, reply string }

// fakeServer serves the i-th connection it accepts with scripts[i] and
// reports each script's outcome on the returned channel.
func fakeServer(t *testing.T, scripts ...[]fakeStep) (addr string, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	knownProtocols.Delete(ln.Addr().String())
	errs := make(chan error, len(scripts))
	go func() {
		for i, script := range scripts {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				for _, s := range script {
					want := unhex(t, s.want)
					got := make([]byte, len(want))
					if _, err := io.ReadFull(c, got); err != nil {
						errs <- fmt.Errorf("connection %d: reading %x: %v", i, want, err)
						return
					}
					if !bytes.Equal(got, want) {
						errs <- fmt.Errorf("connection %d: client sent %x, want %x", i, got, want)
						return
					}
					switch s.reply {
					case "close":
						errs <- nil
						return
					case "silent":
						io.Copy(io.Discard, c)
						errs <- nil
						return
					}
					if _, err := c.Write(unhex(t, s.reply)); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String(), errs
}

func pingBytes() string {
	return hex.EncodeToString(binary.LittleEndian.AppendUint32(nil, pingNonce))
}

// A torch 2.x classic server older than PING closes the connection at PING
// (an unknown query): after a closed 1.x probe, the client confirms
// VALIDATE with a 2.x CHECK of no keys instead, and remembers to open its
// later connections that way.
func TestProbeTorch2WithoutPing(t *testing.T) {
	t.Setenv(envTorchStore, "")
	open := "00 cef7853c 05 0000000000000000" // VALIDATE, 2.x CHECK of no keys
	addr, done := fakeServer(t,
		[]fakeStep{{"04 0000000000000000", "close"}},           // the 1.x probe
		[]fakeStep{{"00 cef7853c 0d " + pingBytes(), "close"}}, // VALIDATE, PING: unknown query
		[]fakeStep{{open, "00"}, // the main connection
			{"05 0100000000000000 0200000000000000 2f6b", "01"},  // Wait(k): CHECK: NOT_READY
			{"05 0100000000000000 0200000000000000 2f6b", "00"}}, // after STOP_WAITING: READY
		[]fakeStep{{open, "00"}, // the wait connection, opened the same way
			{"06 0100000000000000 0200000000000000 2f6b", "00"}},
	)
	ctx := testCtx(t)
	st, err := DialTCPStore(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.TorchProtocol() != 2 {
		t.Fatalf("TorchProtocol() = %d, want 2", st.TorchProtocol())
	}
	if err := st.Wait(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// GOCOMM_TORCH_STORE=2 against a 2.x server older than PING: the PING is
// refused, the probe (1.x CHECK refused) tells it from a 1.x server, and
// VALIDATE is confirmed with a 2.x CHECK.
func TestForcedTorch2WithoutPing(t *testing.T) {
	t.Setenv(envTorchStore, "2")
	addr, done := fakeServer(t,
		[]fakeStep{{"00 cef7853c 0d " + pingBytes(), "close"}}, // forced: VALIDATE, PING
		[]fakeStep{{"04 0000000000000000", "close"}},           // the probe: refused, so 2.x
		[]fakeStep{{"00 cef7853c 0d " + pingBytes(), "close"}},
		[]fakeStep{{"00 cef7853c 05 0000000000000000", "00"}},
	)
	st, err := DialTCPStore(testCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.TorchProtocol() != 2 {
		t.Fatalf("TorchProtocol() = %d, want 2", st.TorchProtocol())
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A torch 1.x server too slow to answer the probe within probeSilence
// looks like torch 2.x's libuv server at first; it closes the connection
// at VALIDATE+PING (for torch 1.x, a SET whose key length is over 2^63),
// so the client asks the 1.x question again, patiently, and speaks 1.x.
func TestProbeSlowTorch1(t *testing.T) {
	t.Setenv(envTorchStore, "")
	addr, done := fakeServer(t,
		[]fakeStep{{"04 0000000000000000", "silent"}}, // too slow: no answer in time
		[]fakeStep{{"00 cef7853c 0d " + pingBytes(), "close"}},
		[]fakeStep{{"04 0000000000000000", "00"}, // asked again: READY
			{"00 0200000000000000 2f6b 0100000000000000 76 04 0000000000000000", "00"}}, // Set(k, v), acknowledged
	)
	ctx := testCtx(t)
	st, err := DialTCPStore(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.TorchProtocol() != 1 {
		t.Fatalf("TorchProtocol() = %d, want 1", st.TorchProtocol())
	}
	mustSet(t, st, "k", "v")
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

const torchWaitingMasterScript = `
import sys, datetime
import torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
print(s.port, flush=True)
s.wait(["go/done"])
print(s.get("go/done").decode(), flush=True)
`

// Against the real torch 1.13: GOCOMM_TORCH_STORE=2 is refused at dial,
// clearly (torch 1.13 resets the connection at VALIDATE+PING: the key
// length it reads is over 2^63), the server is unharmed, and the probe
// then picks 1.x.
func TestTorch113RefusesForcedTorch2(t *testing.T) {
	requireTorch(t)
	out, wait := startPython(t, torchWaitingMasterScript)
	port := readLine(t, out, wait)
	addr := "127.0.0.1:" + port
	knownProtocols.Delete(addr)
	ctx := testkitContext(t, 60*time.Second)

	t.Setenv(envTorchStore, "2")
	start := time.Now()
	_, err := DialTCPStore(ctx, addr)
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "GOCOMM_TORCH_STORE=2 forces") {
		t.Fatalf("forced 2.x against torch 1.13: %v, want ErrProtocol saying GOCOMM_TORCH_STORE=2 forces", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("torch 1.13 took %v to refuse VALIDATE+PING", took)
	}
	t.Setenv(envTorchStore, "auto")
	st, err := DialTCPStore(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.TorchProtocol() != 1 {
		t.Fatalf("TorchProtocol() = %d against torch 1.13, want 1", st.TorchProtocol())
	}
	if err := st.MultiSet(ctx, []string{"go/a", "go/done"}, [][]byte{[]byte("1"), []byte("bye")}); err != nil {
		t.Fatal(err)
	}
	if vs, err := st.MultiGet(ctx, "go/done", "go/a"); err != nil || len(vs) != 2 || string(vs[0]) != "bye" || string(vs[1]) != "1" {
		t.Fatalf("MultiGet against torch 1.13 = %q, %v", vs, err)
	}
	if line := readLine(t, out, wait); line != "bye" {
		t.Fatalf("torch saw %q, want bye", line)
	}
	if err := wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
}

func testkitContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
