package rendezvous

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

func authSeeds(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(authMagic))
	opener := append(append([]byte(authMagic), authVersion), make([]byte, authNonceSize)...)
	f.Add(opener)
	f.Add(append(bytes.Clone(opener), make([]byte, authMACSize)...))
	f.Add(append(append([]byte(authMagic), 9), make([]byte, authNonceSize+authMACSize)...))
	set, _ := appendRequest(nil, dialectV1, request{op: opSet, keys: []string{"/k"}, values: [][]byte{[]byte("v")}})
	f.Add(set)
	f.Add(append(append(bytes.Clone(opener), make([]byte, authMACSize)...), set...))
}

// FuzzTCPStoreAuthServe runs a server connection that requires a secret
// over arbitrary client bytes: without the secret no request may reach the
// table, whatever arrives, and the connection's goroutines end.
func FuzzTCPStoreAuthServe(f *testing.F) {
	authSeeds(f)
	requestSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &TCPStoreServer{done: make(chan struct{}), t: newTable(), conns: map[*serverConn]struct{}{},
			secret: []byte("fuzz secret"), authTimeout: time.Second}
		client, server := net.Pipe()
		c := newServerConn(srv, server)
		srv.conns[c] = struct{}{}
		srv.wg.Add(1)
		served := make(chan struct{})
		go func() {
			c.serve()
			close(served)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(data)
		client.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Fatal("serve did not return after the client hung up")
		}
		srv.wg.Wait()
		if n := srv.t.numKeys(); n != 0 {
			t.Fatalf("an unauthenticated client set %d keys", n)
		}
	})
}

// FuzzTCPStoreAuthClient answers a client's opener with arbitrary bytes:
// the client must fail (it cannot be fooled without the secret), never
// panic or hang.
func FuzzTCPStoreAuthClient(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{authStatusNone})
	f.Add(append([]byte{authStatusAuth}, make([]byte, authNonceSize+authMACSize+1)...))
	f.Add(append([]byte{authStatusAuth}, make([]byte, 10)...))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, answer []byte) {
		var sink bytes.Buffer
		err := clientAuth(bufio.NewReader(bytes.NewReader(answer)), &sink, []byte("fuzz secret"))
		if err == nil {
			t.Fatalf("authenticated by a server that answered %x", answer)
		}
	})
}
