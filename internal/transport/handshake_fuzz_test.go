package transport

import (
	"io"
	"net"
	"testing"
	"time"
)

// FuzzHandshakeAccept plays an arbitrary dialer against the acceptor's
// side of the handshake: it must fail (a forged proof cannot pass without
// the secret), never panic or hang, and read no more than a hello and a
// proof.
func FuzzHandshakeAccept(f *testing.F) {
	hc := &handshakeConfig{rank: 0, size: 2, job: jobID("fuzz"), secret: []byte("k"), maxFragment: 64}
	good := (&hello{size: 2, rank: 1, peerRank: 0, maxFragment: 64, job: hc.job}).encode()
	f.Add(good)
	f.Add(append(append([]byte{}, good...), make([]byte, macSize)...))
	f.Add(good[:10])
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		acc, dial := net.Pipe()
		acc.SetDeadline(time.Now().Add(2 * time.Second))
		go io.Copy(io.Discard, dial)
		go func() {
			dial.Write(in)
			dial.Close()
		}()
		peer, _, err := hc.acceptHandshake(acc)
		acc.Close()
		if err == nil {
			t.Fatalf("accepted rank %d from %x", peer, in)
		}
	})
}

// FuzzHandshakeDial answers a dialer's hello with arbitrary bytes: the
// dialer must fail, never panic or hang, once the answer ends.
func FuzzHandshakeDial(f *testing.F) {
	hc := &handshakeConfig{rank: 1, size: 2, job: jobID("fuzz"), secret: []byte("k"), maxFragment: 64}
	good := (&hello{size: 2, rank: 0, peerRank: 1, maxFragment: 64, job: hc.job}).encode()
	f.Add(append(append([]byte{}, good...), make([]byte, macSize+1)...))
	f.Add(good)
	f.Add([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, answer []byte) {
		dial, acc := net.Pipe()
		dial.SetDeadline(time.Now().Add(2 * time.Second))
		go func() {
			io.CopyN(io.Discard, acc, helloSize)
			acc.Write(answer)
			acc.Close()
		}()
		_, err := hc.dialHandshake(dial, 0)
		dial.Close()
		acc.Close()
		if err == nil {
			t.Fatalf("handshake passed against answer %x", answer)
		}
	})
}
