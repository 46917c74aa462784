package transport

import (
	"net"
	"testing"
	"time"
)

func frameBytes(fh frameHeader, payload []byte) []byte {
	return append(encodeFrame(fh), payload...)
}

// FuzzConnStream feeds arbitrary bytes to a connection's reader after a
// real handshake, with receives posted. The reader must end (at EOF if not
// earlier) without panicking, hanging or allocating beyond what arrives,
// and must leave no receive it could serve pending.
func FuzzConnStream(f *testing.F) {
	msg := func(h Header, total uint64, off int, p []byte) []byte {
		return frameBytes(frameHeader{typ: frameData, h: h, total: total, offset: uint64(off), fragLen: uint32(len(p))}, p)
	}
	var two []byte
	two = append(two, msg(Header{}, 8, 0, []byte("abcd"))...)
	two = append(two, msg(Header{}, 8, 4, []byte("efgh"))...)
	f.Add(two)
	f.Add(append(msg(Header{Seq: 1}, 3, 0, []byte("xyz")), frameBytes(frameHeader{typ: frameGoodbye}, nil)...))
	f.Add(frameBytes(frameHeader{typ: frameAbort, total: 4, fragLen: 4}, []byte("boom")))
	f.Add(frameBytes(frameHeader{typ: frameWaiting, h: Header{Comm: 2, Seq: 1500}}, nil))
	f.Add(msg(Header{Tag: 1}, 0, 0, nil))
	f.Add(msg(Header{Seq: 1, Sig: Signature{Count: 3}}, 100, 0, make([]byte, 64)))
	f.Add(msg(Header{}, 1<<40, 0, make([]byte, 64)))
	f.Add([]byte("garbage that is not a frame at all, but long enough to fill a header........"))

	f.Fuzz(func(t *testing.T, stream []byte) {
		acc, dial := net.Pipe()
		hcA := &handshakeConfig{rank: 0, size: 2, job: jobID("fuzz"), secret: []byte("k"), maxFragment: 64}
		hcD := &handshakeConfig{rank: 1, size: 2, job: jobID("fuzz"), secret: []byte("k"), maxFragment: 64}
		deadline := time.Now().Add(5 * time.Second)
		acc.SetDeadline(deadline)
		dial.SetDeadline(deadline)
		dialErr := make(chan error, 1)
		go func() {
			_, err := hcD.dialHandshake(dial, 0)
			dialErr <- err
		}()
		peer, frag, err := hcA.acceptHandshake(acc)
		if err == nil {
			err = sendAck(acc)
		}
		if err2 := <-dialErr; err != nil || err2 != nil || peer != 1 {
			t.Fatalf("handshake: %v, %v, peer %d", err, err2, peer)
		}
		acc.SetDeadline(time.Time{})
		e := newTCP(0, 2, 64, 100*time.Millisecond, []net.Conn{nil, acc}, []int{0, frag})
		defer e.Close()

		posted := []*recvOp{
			{peer: 1, h: Header{}, buf: make([]byte, 8)},
			{peer: AnySource, h: Header{Seq: 1}, buf: make([]byte, 100)},
			{peer: 1, h: Header{Tag: 1}, buf: nil},
		}
		e.mb.mu.Lock()
		for _, r := range posted {
			r.done = make(chan struct{})
			e.mb.postLocked(r)
		}
		e.mb.mu.Unlock()

		written := make(chan struct{})
		go func() {
			defer close(written)
			dial.Write(stream)
			dial.Close()
		}()
		select {
		case <-e.conns[1].readerDone:
		case <-time.After(5 * time.Second):
			t.Fatal("reader did not finish")
		}
		<-written
		for i, r := range posted {
			select {
			case <-r.done:
			default:
				t.Fatalf("receive %d still pending after the connection ended", i)
			}
		}
	})
}
