package transport

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestPollingReader: the connection reader returns what arrives, whether
// it was polling or parked when it came, and io.EOF when the peer hangs
// up, for every spin (none, short, longer than the wait).
func TestPollingReader(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond, time.Second} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		w, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		r, err := ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		var s atomic.Int64
		s.Store(int64(spin))
		pr := newConnReader(r, &s)
		if _, ok := pr.(*pollingReader); !ok {
			t.Fatalf("a TCP connection is read through %T, want *pollingReader", pr)
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
