package transport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gocomm/comm/core"
)

// Wire format. Every frame starts with a fixed little-endian header:
//
//	off size field
//	  0    4 magic "GCOM"
//	  4    1 version
//	  5    1 frame type (data, abort, goodbye, waiting)
//	  6    2 reserved, zero
//	  8    8 Comm
//	 16    8 Seq
//	 24    8 Tag
//	 32    1 Sig.Kind
//	 33    1 Sig.DType
//	 34    1 Sig.Op
//	 35    1 Sig.Algo
//	 36    4 Sig.Root (int32)
//	 40    8 Sig.Count
//	 48    8 total message length
//	 56    8 fragment offset
//	 64    4 fragment length
//	 68    4 reserved, zero
//
// followed by fragment-length payload bytes. A message longer than the
// fragment size is sent as consecutive data frames with the same header
// fields and increasing offsets, written back to back under the
// connection's write lock, so fragments of different messages never
// interleave on one connection. An abort frame's payload is the reason
// text, and its header carries the abort's root cause where a data frame
// has its address: Comm is the FailureKind, Seq the world rank that
// failed first plus one, Tag the rank that reported it plus one (zero:
// not known). A goodbye frame has no payload and is the last frame on a
// connection. A waiting frame has no payload either: Comm is the world
// rank the sender waits for plus one (zero: it waits for nobody any more)
// and Seq how many milliseconds the notice holds unless renewed (see
// WaitNotifier).
const (
	frameMagic   = 0x4d4f4347 // "GCOM" little-endian
	frameVersion = 1
	headerSize   = 72

	// maxMessage bounds the total length a header may announce.
	maxMessage = 1 << 40
	// maxFragmentLimit bounds MaxFragment options and handshake values.
	maxFragmentLimit = 1 << 30
	// maxAbortReason bounds an abort frame's reason text.
	maxAbortReason = 4096
	// DefaultMaxFragment is the fragment size used when an Options field is 0.
	DefaultMaxFragment = 16 << 20
)

type frameType uint8

const (
	frameData frameType = iota + 1
	frameAbort
	frameGoodbye
	frameWaiting
)

// maxWaitingValid bounds how long a waiting frame may say it holds.
const maxWaitingValid = 3_600_000 // milliseconds

func (t frameType) String() string {
	switch t {
	case frameData:
		return "data"
	case frameAbort:
		return "abort"
	case frameGoodbye:
		return "goodbye"
	case frameWaiting:
		return "waiting"
	}
	return fmt.Sprintf("frameType(%d)", uint8(t))
}

// frameHeader is one decoded frame header.
type frameHeader struct {
	typ     frameType
	h       Header
	total   uint64 // whole message length
	offset  uint64 // of this fragment within the message
	fragLen uint32 // payload bytes following this header
}

// errBadFrame is wrapped by every header decoding error.
var errBadFrame = errors.New("bad frame header")

// encode writes fh into b, which must be at least headerSize long.
func (fh *frameHeader) encode(b []byte) {
	_ = b[headerSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], frameMagic)
	b[4] = frameVersion
	b[5] = byte(fh.typ)
	le.PutUint16(b[6:], 0)
	le.PutUint64(b[8:], fh.h.Comm)
	le.PutUint64(b[16:], fh.h.Seq)
	le.PutUint64(b[24:], fh.h.Tag)
	b[32] = byte(fh.h.Sig.Kind)
	b[33] = byte(fh.h.Sig.DType)
	b[34] = byte(fh.h.Sig.Op)
	b[35] = fh.h.Sig.Algo
	le.PutUint32(b[36:], uint32(fh.h.Sig.Root))
	le.PutUint64(b[40:], fh.h.Sig.Count)
	le.PutUint64(b[48:], fh.total)
	le.PutUint64(b[56:], fh.offset)
	le.PutUint32(b[64:], fh.fragLen)
	le.PutUint32(b[68:], 0)
}

// decodeFrameHeader parses and bounds-checks one header. maxFragment is the
// largest data fragment this receiver accepts. Any error means the stream is
// unusable and the connection must be dropped.
func decodeFrameHeader(b []byte, maxFragment int) (frameHeader, error) {
	var fh frameHeader
	if len(b) < headerSize {
		return fh, fmt.Errorf("%w: %d bytes, want %d", errBadFrame, len(b), headerSize)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != frameMagic {
		return fh, fmt.Errorf("%w: magic %#08x, want %#08x", errBadFrame, m, frameMagic)
	}
	if b[4] != frameVersion {
		return fh, fmt.Errorf("%w: version %d, want %d", errBadFrame, b[4], frameVersion)
	}
	if le.Uint16(b[6:]) != 0 || le.Uint32(b[68:]) != 0 {
		return fh, fmt.Errorf("%w: reserved bytes are not zero", errBadFrame)
	}
	fh.typ = frameType(b[5])
	fh.h.Comm = le.Uint64(b[8:])
	fh.h.Seq = le.Uint64(b[16:])
	fh.h.Tag = le.Uint64(b[24:])
	fh.h.Sig.Kind = core.Kind(b[32])
	fh.h.Sig.DType = core.DType(b[33])
	fh.h.Sig.Op = core.Op(b[34])
	fh.h.Sig.Algo = b[35]
	fh.h.Sig.Root = int32(le.Uint32(b[36:]))
	fh.h.Sig.Count = le.Uint64(b[40:])
	fh.total = le.Uint64(b[48:])
	fh.offset = le.Uint64(b[56:])
	fh.fragLen = le.Uint32(b[64:])

	if fh.total > maxMessage {
		return fh, fmt.Errorf("%w: message length %d exceeds the limit %d", errBadFrame, fh.total, uint64(maxMessage))
	}
	if fh.offset > fh.total || uint64(fh.fragLen) > fh.total-fh.offset {
		return fh, fmt.Errorf("%w: fragment [%d, +%d) outside a %d-byte message", errBadFrame, fh.offset, fh.fragLen, fh.total)
	}
	switch fh.typ {
	case frameData:
		if maxFragment < 1 || int64(fh.fragLen) > int64(maxFragment) {
			return fh, fmt.Errorf("%w: fragment of %d bytes exceeds the limit %d", errBadFrame, fh.fragLen, maxFragment)
		}
		if fh.fragLen == 0 && fh.total != 0 {
			return fh, fmt.Errorf("%w: empty fragment in a %d-byte message", errBadFrame, fh.total)
		}
	case frameAbort:
		if fh.total > maxAbortReason || fh.offset != 0 || uint64(fh.fragLen) != fh.total {
			return fh, fmt.Errorf("%w: abort frame with %d-byte reason (limit %d, one fragment)", errBadFrame, fh.total, maxAbortReason)
		}
	case frameGoodbye:
		if fh.total != 0 {
			return fh, fmt.Errorf("%w: goodbye frame with a %d-byte payload", errBadFrame, fh.total)
		}
	case frameWaiting:
		if fh.total != 0 || fh.h.Seq > maxWaitingValid {
			return fh, fmt.Errorf("%w: waiting frame with a %d-byte payload or holding %d ms (limit %d)", errBadFrame, fh.total, fh.h.Seq, maxWaitingValid)
		}
	default:
		return fh, fmt.Errorf("%w: unknown frame type %d", errBadFrame, b[5])
	}
	return fh, nil
}

// continues reports whether fh is the fragment of first's message that must
// follow once got bytes of it have been read.
func (fh *frameHeader) continues(first *frameHeader, got uint64) bool {
	return fh.typ == frameData && fh.h == first.h && fh.total == first.total && fh.offset == got
}

// abortFrame is what an abort frame says: the reason text and the root
// cause (see RemoteAbortError).
type abortFrame struct {
	origin, reporter int
	kind             FailureKind
	reason           string
}

// header is the abort frame's header.
func (ab *abortFrame) header() frameHeader {
	n := len(ab.reason)
	fh := frameHeader{typ: frameAbort, total: uint64(n), fragLen: uint32(n)}
	if ab.kind != core.FailUnknown && ab.origin >= 0 && ab.reporter >= 0 {
		fh.h.Comm = uint64(ab.kind)
		fh.h.Seq = uint64(ab.origin) + 1
		fh.h.Tag = uint64(ab.reporter) + 1
	}
	return fh
}

// remoteAbort is the error of an abort frame (header fh, payload reason)
// from peer in a world of size ranks. A root cause naming ranks outside
// the world, or of an unknown kind, is dropped (the reason stays).
func remoteAbort(peer, size int, fh *frameHeader, reason []byte) *RemoteAbortError {
	ra := &RemoteAbortError{Peer: peer, Reason: string(reason)}
	kind, origin, reporter := fh.h.Comm, fh.h.Seq, fh.h.Tag
	if kind > uint64(core.FailUnknown) && kind <= uint64(core.FailError) &&
		origin >= 1 && origin <= uint64(size) && reporter >= 1 && reporter <= uint64(size) {
		ra.Kind, ra.Origin, ra.Reporter = core.FailureKind(kind), int(origin-1), int(reporter-1)
	}
	return ra
}
