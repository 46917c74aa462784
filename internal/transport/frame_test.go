package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gocomm/comm/core"
)

func encodeFrame(fh frameHeader) []byte {
	b := make([]byte, headerSize)
	fh.encode(b)
	return b
}

func TestFrameHeaderRoundTrip(t *testing.T) {
	want := frameHeader{
		typ: frameData,
		h: Header{Comm: 1 << 60, Seq: 42, Tag: 7<<16 | 3, Sig: Signature{
			Kind: core.KindReduce, DType: core.BFloat16, Op: core.Max, Algo: 2, Root: -1, Count: 1 << 33,
		}},
		total: 100, offset: 64, fragLen: 36,
	}
	got, err := decodeFrameHeader(encodeFrame(want), 64)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestDecodeFrameHeaderRejects(t *testing.T) {
	valid := frameHeader{typ: frameData, total: 10, fragLen: 10}
	patch := func(off int, v []byte) []byte {
		b := encodeFrame(valid)
		copy(b[off:], v)
		return b
	}
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	cases := []struct {
		name string
		b    []byte
	}{
		{"short", encodeFrame(valid)[:headerSize-1]},
		{"magic", patch(0, []byte("HTTP"))},
		{"version", patch(4, []byte{2})},
		{"type", patch(5, []byte{9})},
		{"reserved", patch(6, []byte{1})},
		{"reserved tail", patch(68, []byte{1})},
		{"absurd total", patch(48, u64(1<<40+1))},
		{"fragment over max", encodeFrame(frameHeader{typ: frameData, total: 1 << 20, fragLen: 1<<16 + 1})},
		{"fragment past end", patch(56, u64(5))},
		{"offset past end", patch(56, u64(11))},
		{"empty fragment", encodeFrame(frameHeader{typ: frameData, total: 10})},
		{"huge abort reason", encodeFrame(frameHeader{typ: frameAbort, total: maxAbortReason + 1, fragLen: maxAbortReason + 1})},
		{"split abort", encodeFrame(frameHeader{typ: frameAbort, total: 10, fragLen: 5})},
		{"goodbye payload", encodeFrame(frameHeader{typ: frameGoodbye, total: 1, fragLen: 1})},
		{"fraglen field", patch(64, u32(11))},
	}
	for _, tc := range cases {
		if _, err := decodeFrameHeader(tc.b, 1<<16); !errors.Is(err, errBadFrame) {
			t.Errorf("%s: got %v, want errBadFrame", tc.name, err)
		}
	}
	if _, err := decodeFrameHeader(encodeFrame(valid), 1<<16); err != nil {
		t.Fatalf("valid header: %v", err)
	}
}

// FuzzDecodeHeader: decoding never panics, and whatever decodes is within
// bounds and re-encodes to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(encodeFrame(frameHeader{typ: frameData, total: 10, fragLen: 10}), 16)
	f.Add(encodeFrame(frameHeader{typ: frameData, total: 1 << 40, offset: 1<<40 - 5, fragLen: 5}), 8)
	f.Add(encodeFrame(frameHeader{typ: frameAbort, total: 3, fragLen: 3}), 1)
	f.Add(encodeFrame(frameHeader{typ: frameGoodbye}), 1)
	f.Add(encodeFrame(frameHeader{typ: frameWaiting, h: Header{Comm: 3, Seq: 1500}}), 1)
	f.Add([]byte("GET / HTTP/1.1\r\n"), 1024)
	f.Fuzz(func(t *testing.T, b []byte, maxFragment int) {
		fh, err := decodeFrameHeader(b, maxFragment)
		if err != nil {
			return
		}
		if fh.total > maxMessage || fh.offset+uint64(fh.fragLen) > fh.total {
			t.Fatalf("out of bounds: %+v", fh)
		}
		if fh.typ == frameData && int64(fh.fragLen) > int64(maxFragment) {
			t.Fatalf("fragment %d over max %d", fh.fragLen, maxFragment)
		}
		if fh.typ == frameAbort && fh.total > maxAbortReason {
			t.Fatalf("abort reason of %d bytes", fh.total)
		}
		if fh.typ == frameWaiting && (fh.total != 0 || fh.h.Seq > maxWaitingValid) {
			t.Fatalf("waiting frame with %d bytes, holding %d ms", fh.total, fh.h.Seq)
		}
		if !bytes.Equal(encodeFrame(fh), b[:headerSize]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestHelloRoundTrip(t *testing.T) {
	h := hello{size: 5, rank: 4, peerRank: 1, maxFragment: 1 << 20, job: jobID("j")}
	h.nonce[3] = 9
	got, err := decodeHello(h.encode())
	if err != nil || got != h {
		t.Fatalf("got %+v, %v", got, err)
	}
	bad := h.encode()
	bad[5] = byte(frameData)
	if _, err := decodeHello(bad); !errors.Is(err, ErrHandshake) {
		t.Fatalf("frame as hello: %v", err)
	}
}
