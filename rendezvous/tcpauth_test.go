package rendezvous

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedLog is a slog handler target safe for the server's goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func authServer(t *testing.T, secret string, opts ...TCPOption) (*TCPStoreServer, *lockedLog) {
	t.Helper()
	log := &lockedLog{}
	opts = append([]TCPOption{WithSecret([]byte(secret)), WithLogger(slog.New(slog.NewTextHandler(log, nil)))}, opts...)
	srv, err := ListenTCPStore("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, log
}

func authCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readsEOF reports whether the server closes nc within d.
func closedWithin(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// With a secret, ranks that share it use the store; a stranger (no secret,
// another secret, garbage, a torch request) is closed and logged, and the
// store keeps serving the ranks.
func TestTCPStoreAuthKeepsStrangersOut(t *testing.T) {
	srv, log := authServer(t, "s3cret")
	ctx := authCtx(t)
	addr := srv.Addr().String()
	rank, err := DialTCPStore(ctx, addr, WithSecret([]byte("s3cret")))
	if err != nil {
		t.Fatal(err)
	}
	defer rank.Close()
	if err := rank.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	// Another secret: the client learns the server's proof is wrong and
	// gives up at once (no retry until ctx ends).
	start := time.Now()
	_, err = DialTCPStore(ctx, addr, WithSecret([]byte("other")))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "secret differs") || time.Since(start) > 5*time.Second {
		t.Errorf("wrong secret: %v after %v", err, time.Since(start))
	}
	// No secret: the client's probe is refused in either torch dialect,
	// and the dial says so at once, naming GOCOMM_SECRET.
	if _, err := DialTCPStore(ctx, addr); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "GOCOMM_SECRET") {
		t.Errorf("dial without the secret: %v, want ErrProtocol naming GOCOMM_SECRET", err)
	}
	// Raw strangers: a torch 2.x VALIDATE, garbage, a forged opener with a
	// made-up proof.
	for _, b := range [][]byte{
		binary.LittleEndian.AppendUint32([]byte{0}, validationMagic),
		[]byte("GET / HTTP/1.0\r\n\r\n"),
		append(append([]byte(authMagic), authVersion), make([]byte, authNonceSize+authMACSize)...),
	} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(b)
		got, _ := io.ReadAll(io.LimitReader(nc, 200))
		nc.Close()
		if len(got) > 1+authNonceSize+authMACSize {
			t.Errorf("stranger %q got %d bytes back", b, len(got))
		}
	}
	if got, err := rank.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Errorf("the rank's store after the strangers: %q, %v", got, err)
	}
	if n := srv.Refused(); n < 5 {
		t.Errorf("Refused() = %d, want >= 5", n)
	}
	// The server logs a refusal after it has counted it (Refused), and
	// the stranger may have read its answer before then: wait for the
	// last line.
	logged := func() bool {
		s := log.String()
		return strings.Count(s, "connection refused") >= 5 && strings.Contains(s, "GOCOMM_STORE_AUTH=0")
	}
	for deadline := time.Now().Add(5 * time.Second); !logged() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !logged() {
		t.Errorf("refusals not logged:\n%s", log.String())
	}
}

// A half-open connection (connects, sends nothing or a byte) is closed
// after the auth timeout, and a slow-drip one too.
func TestTCPStoreAuthTimeout(t *testing.T) {
	srv, log := authServer(t, "s3cret", WithAuthTimeout(200*time.Millisecond))
	for _, first := range [][]byte{nil, []byte("G"), []byte(authMagic)} {
		nc, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(first)
		if !closedWithin(nc, 5*time.Second) {
			t.Errorf("connection that sent %q not closed after the auth timeout", first)
		}
		nc.Close()
	}
	if s := log.String(); strings.Count(s, "connection refused") < 3 {
		t.Errorf("timeouts not logged:\n%s", s)
	}
}

// A client with a secret and a server without one (or torch's) fail with
// an error that says which side lacks it.
func TestTCPStoreAuthMismatchNamesTheSide(t *testing.T) {
	srv, err := ListenTCPStore("127.0.0.1:0", WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, err = DialTCPStore(authCtx(t), srv.Addr().String(), WithSecret([]byte("x")))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "server has no secret") {
		t.Errorf("server without secret: %v", err)
	}
	// A server that hangs up on the opener, as torch's does.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Read(make([]byte, 1))
			nc.Close()
		}
	}()
	_, err = DialTCPStore(authCtx(t), ln.Addr().String(), WithSecret([]byte("x")))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "GOCOMM_STORE_AUTH=0") {
		t.Errorf("torch-like server: %v", err)
	}
}

// NewTCPStore passes the secret to the server it starts and to its client;
// a 2.x-dialect client authenticates as well.
func TestNewTCPStoreWithSecret(t *testing.T) {
	ctx := authCtx(t)
	st, err := NewTCPStore(ctx, "127.0.0.1:0", true, WithSecret([]byte("k")), WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.server.secret == nil {
		t.Fatal("the master's server has no secret")
	}
	v2, err := dialTCPStore(ctx, st.Addr(), dialectV2, WithSecret([]byte("k")))
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if err := st.Set(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if got, err := v2.Get(ctx, "a"); err != nil || string(got) != "1" {
		t.Errorf("Get over an authenticated 2.x connection: %q, %v", got, err)
	}
	if n := st.server.Refused(); n != 0 {
		t.Errorf("%d connections of the job refused", n)
	}
}

// A length announced on the wire costs memory only as its bytes arrive.
func TestReadSizedAllocatesAsBytesArrive(t *testing.T) {
	wire := binary.LittleEndian.AppendUint64(nil, MaxValueLen)
	wire = append(wire, make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := readSized(bufio.NewReaderSize(bytes.NewReader(wire), 16), MaxValueLen, "value"); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated value: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 16<<10 {
		t.Errorf("a 1 GiB length with 100 bytes behind it allocated %d bytes", per)
	}
	// And a value that does arrive is read whole.
	v := bytes.Repeat([]byte("ab"), 50_000)
	got, err := readSized(bytes.NewReader(appendSized(nil, v)), MaxValueLen, "value")
	if err != nil || !bytes.Equal(got, v) {
		t.Errorf("readSized of %d bytes: %d bytes, %v", len(v), len(got), err)
	}
}

func TestRefusalLogPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		total int
		since time.Duration
		want  bool
	}{
		{0, 0, true}, {refusalBurst - 1, 0, true}, {refusalBurst, 10 * time.Millisecond, false},
		{refusalBurst + 500, refusalEvery, true}, {1000, refusalEvery - time.Millisecond, false},
	} {
		if got := shouldLog(tt.total, t0, t0.Add(tt.since)); got != tt.want {
			t.Errorf("shouldLog(%d refused, %v since the last line) = %v", tt.total, tt.since, got)
		}
	}
}

// A server that accepts and says nothing (torch 2.x's libuv server with
// bytes it cannot parse) fails the client's handshake after
// the auth timeout with an error that says so, not at the caller's ctx.
func TestClientAuthBoundedBySilentServer(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	go io.Copy(io.Discard, server) // reads the opener, answers nothing
	start := time.Now()
	const d = 200 * time.Millisecond
	err := clientAuthBounded(client, client, []byte("k"), d)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "did not answer the handshake") {
		t.Errorf("silent server: %v", err)
	}
	if took := time.Since(start); took < d || took > d+5*time.Second {
		t.Errorf("gave up after %v, want about %v", took, d)
	}
}
