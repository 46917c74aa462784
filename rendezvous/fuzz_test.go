package rendezvous

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

func requestSeeds(f *testing.F) {
	var stream []byte
	for _, tc := range torch113Requests {
		w := unhex(f, tc.wire)
		f.Add(w)
		stream = append(stream, w...)
	}
	f.Add(stream)
	v2 := unhex(f, "00cef7853c")
	for _, req := range []request{
		{op: opPing, word: 7},
		{op: opMultiSet, keys: []string{"a", "b"}, values: [][]byte{[]byte("1"), nil}},
		{op: opMultiGet, keys: []string{"a", "b"}},
		{op: opAppend, keys: []string{"a"}, values: [][]byte{[]byte("x")}},
		{op: opWait, keys: []string{"zz"}},
		{op: opCancelWait},
		{op: opAdd, keys: []string{"n"}, delta: -1},
	} {
		v2, _ = appendRequest(v2, dialectV2, req)
	}
	f.Add(v2)
	f.Add(unhex(f, "05 0100000000000000 0300000000000000 2f6162 05 0100000000000000 0100000000000000 78"))
	f.Add(unhex(f, "04 ffffffffffffffff"))
	f.Add(unhex(f, "00 ffffffffffffffff"))
	f.Add([]byte{})
}

// FuzzTCPStoreRequest feeds arbitrary bytes to the server's request
// decoder: it must not panic or over-allocate, must respect the limits, and
// every request it accepts must re-encode to exactly the bytes it consumed.
func FuzzTCPStoreRequest(f *testing.F) {
	requestSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := bytes.NewReader(data)
		br := bufio.NewReader(rd)
		d, err := detectDialect(br)
		if err != nil {
			return
		}
		consumed := func() int { return len(data) - rd.Len() - br.Buffered() }
		for range 10000 {
			start := consumed()
			req, err := readRequest(br, d)
			if err != nil {
				return
			}
			if len(req.keys) > MaxKeys {
				t.Fatalf("%d keys accepted", len(req.keys))
			}
			for _, k := range req.keys {
				if len(k) > MaxKeyLen {
					t.Fatalf("%d-byte key accepted", len(k))
				}
			}
			enc, err := appendRequest(nil, d, req)
			if err != nil {
				t.Fatalf("decoded %+v cannot be encoded: %v", req, err)
			}
			if got := data[start:consumed()]; !bytes.Equal(enc, got) {
				t.Fatalf("%v: decoded %+v from %x, which encodes as %x", d, req, got, enc)
			}
		}
	})
}

// FuzzTCPStoreServe runs one server connection over arbitrary client bytes:
// whatever arrives, the connection's goroutines end when the client hangs
// up and the server stays usable.
func FuzzTCPStoreServe(f *testing.F) {
	requestSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &TCPStoreServer{done: make(chan struct{}), t: newTable(), conns: map[*serverConn]struct{}{}}
		client, server := net.Pipe()
		c := newServerConn(srv, server)
		srv.conns[c] = struct{}{}
		srv.wg.Add(1)
		served := make(chan struct{})
		go func() {
			c.serve()
			close(served)
		}()
		go io.Copy(io.Discard, client) // replies
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(data) // the server may hang up first
		client.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Fatal("serve did not return after the client hung up")
		}
		srv.wg.Wait()
		if len(srv.conns) != 0 {
			t.Fatal("connection not unregistered")
		}
		if len(srv.t.waiting) != 0 {
			t.Fatalf("waits of a closed connection left registered: %v", srv.t.waiting)
		}
	})
}

// FuzzFileLog feeds arbitrary bytes to the file store's log decoder: it
// must consume only complete records, which re-encode to exactly the bytes
// consumed, and replaying them must not panic.
func FuzzFileLog(f *testing.F) {
	f.Add(unhex(f, "02000000 2f61 01000000 31 03000000 2d2f61 00000000"))
	f.Add(unhex(f, "ffffffff 00"))
	f.Add(unhex(f, "01000000 2f ffffffff"))
	f.Add(appendLogRecord(appendLogRecord(nil, "/k", []byte("v")), "cleanup/", []byte("1")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, n := decodeLog(data)
		if n < 0 || n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		var enc []byte
		for _, r := range recs {
			enc = appendLogRecord(enc, r.key, r.value)
		}
		if !bytes.Equal(enc, data[:n]) {
			t.Fatalf("records %q re-encode as %x, consumed %x", recs, enc, data[:n])
		}
		if more, m := decodeLog(data[n:]); len(more) != 0 || m != 0 {
			t.Fatalf("decoding stopped before %d more records", len(more))
		}
		applyLog(map[string][]byte{}, recs)
	})
}
