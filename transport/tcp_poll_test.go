package transport

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestPollingReader: the connection reader returns what arrives, whether
// it was polling or parked when it came, and io.EOF when the peer hangs
// up, for every spin (none, short, longer than the wait); it polls where
// the build has polling reads and is the connection itself elsewhere.
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
