package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// FuzzSHMRing feeds the shared-memory ring decoder records a broken or
// hostile peer could write: any kind, declared length and header, and any
// payload, published at the offsets a producer would use. The receiving
// endpoint must deliver, time out or declare the ring broken (the peer
// lost) or closed, never panic, read out of the ring or hang, and still
// close.
func FuzzSHMRing(f *testing.F) {
	first := make([]byte, 64)
	first[8] = recFirst
	binary.LittleEndian.PutUint32(first[12:], 8)
	binary.LittleEndian.PutUint64(first[56:], 8)
	f.Add(append(append([]byte{}, first...), 1, 2, 3, 4, 5, 6, 7, 8))
	f.Add([]byte{})
	bad := append([]byte{}, first...)
	binary.LittleEndian.PutUint32(bad[12:], 1<<30) // longer than the ring
	f.Add(bad)
	more := append([]byte{}, first...)
	more[8] = recMore
	f.Add(more)
	huge := append([]byte{}, first...)
	binary.LittleEndian.PutUint64(huge[56:], 1<<62) // total beyond any message
	f.Add(append(huge, make([]byte, 8)...))
	f.Add(append(append([]byte{}, first[:8]...), 99)) // unknown kind
	single := append([]byte{}, first...)
	single[8] = recSingle
	f.Add(append(single, 0, 0x10, 0, 0, 0, 0, 0, 0)) // a message at an unmapped address
	f.Fuzz(func(t *testing.T, data []byte) {
		ws := shmWorld(t, 2)
		sender, recv := ws[1], ws[0]
		o := sender.shm.out[0]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.lock.lock(ctx, nil); err != nil {
			t.Fatal(err)
		}
		// Records: a 64-byte header image (its sequence word is the
		// producer's) and up to 192 bytes of payload each.
		written := 0
		for len(data) >= 9 && written < minRingBytes/2 { // fits: no wait for room
			written += recordSpan(min(len(data)-min(len(data), recHeader), 192))
			hdr := make([]byte, recHeader)
			n := copy(hdr, data)
			data = data[n:]
			p := min(len(data), 192)
			payload := data[:p]
			data = data[p:]
			span := recordSpan(len(payload))
			off, err := sender.shm.reserve(ctx, o, span, true)
			if err != nil {
				break
			}
			copy(o.d[off+8:off+recHeader], hdr[8:])
			copy(o.d[off+recHeader:], payload)
			o.publish(off, span)
		}
		o.lock.unlock()
		rctx, rcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer rcancel()
		buf := make([]byte, 8)
		_, err := recv.Recv(rctx, 1, Header{}, buf)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrPeerLost) &&
			!errors.Is(err, ErrLength) && !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerClosed) {
			t.Errorf("Recv: unexpected error %v", err)
		}
	})
}
