package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocomm/comm/core"
)

// goRecvUpTo is goRecv for RecvUpTo.
func goRecvUpTo(ctx context.Context, e Endpoint, peer int, h Header, buf []byte) <-chan upToResult {
	ch := make(chan upToResult, 1)
	go func() {
		n, from, err := e.(UpToReceiver).RecvUpTo(ctx, peer, h, buf)
		ch <- upToResult{from, n, err}
	}()
	return ch
}

type upToResult struct {
	from, n int
	err     error
}

func waitUpTo(t testing.TB, ch <-chan upToResult) upToResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("RecvUpTo still pending after 10s")
		return upToResult{}
	}
}

// p2pSig is the signature of a point-to-point message of count elements.
func p2pSig(count uint64) Signature {
	return Signature{Kind: core.KindSend, DType: core.Uint8, Count: count}
}

// TestRecvUpTo: a message shorter than the buffer lands in buf[:n] with
// n returned and buf[n:] untouched, on every endpoint, for messages sent
// before and after the receive is posted, whole or in fragments, through
// rings, records and single copies (300 KB).
func TestRecvUpTo(t *testing.T) {
	sizes := []int{0, 1, 7, 1000, 100_003, 300_000}
	for _, frag := range []int{0, 7} {
		forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
			eps := world(3, worldConfig{maxFragment: frag})
			ctx := tctx(t)
			for i, n := range sizes {
				if frag != 0 && n > 1000 {
					continue // 7-byte fragments of large messages are slow and add nothing
				}
				want := payload(uint64(i), n)
				h := Header{Comm: 1, Tag: uint64(10 + i), Sig: p2pSig(uint64(n))}
				check := func(how string, r upToResult, buf []byte, from int) {
					t.Helper()
					if r.err != nil || r.from != from || r.n != n {
						t.Fatalf("size %d %s: from %d, n %d, %v; want from %d, n %d", n, how, r.from, r.n, r.err, from, n)
					}
					if !bytes.Equal(buf[:n], want) || !bytes.Equal(buf[n:], bytes.Repeat([]byte{0xAA}, len(buf)-n)) {
						t.Fatalf("size %d %s: payload or the rest of the buffer differs", n, how)
					}
				}
				// Posted first, into a buffer 13 bytes longer.
				buf := bytes.Repeat([]byte{0xAA}, n+13)
				recvSig := h
				recvSig.Sig = p2pSig(uint64(len(buf))) // the receiver's count is its buffer's
				ch := goRecvUpTo(ctx, eps[1], 0, recvSig, buf)
				time.Sleep(time.Millisecond)
				if err := eps[0].Send(ctx, 1, h, want); err != nil {
					t.Fatal(err)
				}
				check("posted first", waitUpTo(t, ch), buf, 0)
				// Sent first, received from AnySource into a buffer of
				// exactly the message's length.
				if err := eps[2].Send(ctx, 1, h, want); err != nil {
					t.Fatal(err)
				}
				buf = bytes.Repeat([]byte{0xAA}, n)
				time.Sleep(time.Millisecond)
				check("sent first", waitUpTo(t, goRecvUpTo(ctx, eps[1], AnySource, recvSig, buf)), buf, 2)
			}
		})
	}
}

// TestRecvUpToTooLong: a message longer than the buffer fails the receive
// with a LengthError naming both lengths and is consumed whole: the next
// message of the same key and sender arrives intact, and the endpoint
// goes on. Also a different element type is a mismatch, not a match.
func TestRecvUpToTooLong(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{maxFragment: 5})
		ctx := tctx(t)
		for _, n := range []int{12, 100_003} {
			h := Header{Comm: 1, Tag: uint64(n), Sig: p2pSig(uint64(n))}
			check := func(how string, err error) {
				t.Helper()
				var le *LengthError
				if !errors.As(err, &le) || !errors.Is(err, ErrLength) || le.Peer != 0 || le.Got != n || le.Want != 8 {
					t.Fatalf("%d bytes %s: %v, want LengthError{0, %d, 8}", n, how, err, n)
				}
			}
			// Sent first.
			if err := eps[0].Send(ctx, 1, h, payload(1, n)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
			_, _, err := eps[1].(UpToReceiver).RecvUpTo(ctx, 0, h, make([]byte, 8))
			check("sent first", err)
			// Posted first.
			ch := goRecvUpTo(ctx, eps[1], 0, h, make([]byte, 8))
			time.Sleep(time.Millisecond)
			if err := eps[0].Send(ctx, 1, h, payload(2, n)); err != nil {
				t.Fatal(err)
			}
			check("posted first", waitUpTo(t, ch).err)
			// In step afterwards: the same key delivers the next message.
			next := []byte("after")
			if err := eps[0].Send(ctx, 1, h, next); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 8)
			got, from, err := eps[1].(UpToReceiver).RecvUpTo(ctx, 0, h, buf)
			if err != nil || from != 0 || string(buf[:got]) != "after" {
				t.Fatalf("%d bytes: after the LengthError: %q from %d, %v", n, buf[:got], from, err)
			}
		}
		// Another element type does not match whatever the lengths.
		h := Header{Comm: 1, Tag: 99, Sig: p2pSig(4)}
		other := h
		other.Sig.DType = core.Int32
		if err := eps[0].Send(ctx, 1, other, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if _, _, err := eps[1].(UpToReceiver).RecvUpTo(ctx, 0, h, make([]byte, 8)); !errors.Is(err, ErrMismatch) {
			t.Fatalf("int32 message into a uint8 RecvUpTo: %v, want ErrMismatch", err)
		}
	})
}
