package transport

import (
	"context"
	"time"

	"github.com/gocomm/comm/core"
)

// AnySource as the peer of Recv matches a message from any peer.
const AnySource = -1

// Header addresses a message. Messages match on (Comm, Seq, Tag, sender);
// messages with the same key from one sender are delivered in order.
// Collectives use Seq >= 1 and Tag = step<<16 | ordinal; point-to-point
// messages use Seq = 0 and the user's tag.
type Header struct {
	Comm uint64 // communicator id
	Seq  uint64 // collective sequence number, 0 for point-to-point
	Tag  uint64
	Sig  Signature
}

// Endpoint moves messages between the ranks of one world. Implementations:
// TCP (one connection per pair of ranks) and in-process (tests). Safe for
// concurrent use.
type Endpoint interface {
	// Rank and Size are this endpoint's world rank and the world size.
	Rank() int
	Size() int
	// Send transmits payload to peer. It returns once payload may be reused
	// (written to the kernel or copied), not when the peer has received it.
	Send(ctx context.Context, peer int, h Header, payload []byte) error
	// Recv receives the next message from peer (or AnySource) whose key
	// matches h into buf. The message must be exactly len(buf) bytes long
	// (else *LengthError) and carry h.Sig (else *MismatchError). It returns
	// the sender's rank, or -1 with an error. buf belongs to the endpoint
	// until Recv returns; if ctx ends first, Recv returns ctx's error and a
	// later message for h is kept for a later Recv.
	Recv(ctx context.Context, peer int, h Header, buf []byte) (from int, err error)
	// Abort fails every pending and later Send and Recv with err (wrapped in
	// ErrAborted) and tells every peer, whose endpoints abort with a
	// *RemoteAbortError. Later calls to Abort do nothing.
	Abort(err error)
	// Close says goodbye to every peer and releases connections. Pending
	// operations fail with ErrClosed.
	Close() error
}

// BufferedSender is implemented by endpoints whose sends of some sizes
// to some peers complete at once (a copy into shared memory), whatever
// the peer is doing.
type BufferedSender interface {
	SendsBuffered(peer, n int) bool
}

// SinkReceiver is implemented by endpoints that can hand a message's
// bytes to a function as they arrive instead of copying them into a
// buffer: a caller that reduces what it receives then reads each piece
// while it is still in cache (straight out of a shared-memory ring, or
// out of a small staging buffer) and never writes the whole message out
// to memory first.
type SinkReceiver interface {
	// RecvSink is Recv from peer (not AnySource) of a message of exactly
	// len(buf) bytes, but instead of writing buf it calls sink(off, p)
	// for consecutive pieces p of the message, off their offset, from
	// 0 to len(buf); buf is never written (it gives the length). sink
	// runs on whichever goroutine takes the message in (possibly not the
	// caller's), one call at a time, and all calls happen before
	// RecvSink returns; p must not be kept. A receive that fails (ctx
	// ended, peer lost) may have passed only part of the message to
	// sink, and the rest of it is dropped.
	RecvSink(ctx context.Context, peer int, h Header, buf []byte, sink func(off int, p []byte)) (from int, err error)
}

// CopySender is implemented by endpoints that can be told to copy a
// message through shared memory where they would otherwise let the peer
// copy it out of this process (single copy): for a message the peer
// reduces piece by piece (SinkReceiver), a copy into the ring, which the
// peer reduces straight out of its cache, costs less than the kernel's
// copy across processes.
type CopySender interface {
	// SendCopy is Send, through the ring for a peer on this host.
	SendCopy(ctx context.Context, peer int, h Header, payload []byte) error
	// CopiesStartable and StartSendCopy are SendStarter's SendsStartable
	// and StartSend for SendCopy's sends.
	CopiesStartable(peer, n int) bool
	StartSendCopy(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error)
}

// SendStarter is implemented by endpoints that can start some sends
// without waiting and finish them later: a single-copy send to a peer on
// this host only publishes where the message is, and is done once the peer
// has copied it; a send too large for its ring writes what fits, and the
// rest is written as the peer frees room by the caller's next receive (or
// by finish). A caller can then receive on the same goroutine meanwhile
// instead of running the send on a goroutine of its own.
type SendStarter interface {
	// SendsStartable reports whether StartSend of n bytes to peer starts
	// a send in progress (else it sends at once, as Send does).
	SendsStartable(peer, n int) bool
	// StartSend starts sending payload to peer. finish must be called
	// exactly once, before payload is modified or reused; it waits until
	// the send is done and returns Send's error.
	StartSend(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error)
}

// WaitNotifier is implemented by endpoints that tell their peers whom this
// rank is waiting for. A rank whose wait for a peer times out can then
// name the rank at the end of the chain of waits (the peer waits for a
// rank that waits for one that is gone) at once, instead of the nearest
// link, without waiting for the peer's own timeout to explain it. Safe
// for concurrent use.
type WaitNotifier interface {
	// NoteWaiting tells every peer that this rank waits for world rank
	// rank, a notice that holds for valid unless renewed; rank -1 says it
	// waits for nobody any more. It does not block: the notices are
	// written by the endpoint's goroutines, a later notice replacing one
	// not yet written, and none is sent once the endpoint has failed or
	// is closing.
	NoteWaiting(rank int, valid time.Duration)
	// PeerWaiting returns the world rank that peer last said it waits for,
	// or -1 when it said nothing, said it waits for nobody, or its notice
	// has expired.
	PeerWaiting(peer int) int
}

// FailureSignal is implemented by endpoints that can say when they fail:
// aborted (here or by a peer), a peer lost, or closed.
type FailureSignal interface {
	// Failed returns a channel closed once the endpoint has failed.
	Failed() <-chan struct{}
}

// The signature and the error values and types are core's, the vocabulary
// every layer shares; these names keep transport's API. They are matched
// with errors.Is and errors.As; the comm package re-exports them.
type (
	Signature        = core.Signature
	AbortError       = core.AbortError
	PeerError        = core.PeerError
	RemoteAbortError = core.RemoteAbortError
	MismatchError    = core.MismatchError
	LengthError      = core.LengthError
	FailureKind      = core.FailureKind
	RankFailure      = core.RankFailure
)

// RootCause is core.RootCause: the rank that failed first, how, and the
// rank that noticed, as an abort tells the peers.
func RootCause(err error, self int) (origin int, kind FailureKind, reporter int) {
	return core.RootCause(err, self)
}

var (
	ErrClosed     = core.ErrClosed
	ErrAborted    = core.ErrAborted
	ErrPeerLost   = core.ErrPeerLost
	ErrPeerClosed = core.ErrPeerClosed
	ErrMismatch   = core.ErrMismatch
	ErrLength     = core.ErrLength
	ErrHandshake  = core.ErrHandshake
	ErrBadPeer    = core.ErrBadPeer
)

// Compile-time checks that both implementations satisfy Endpoint.
var (
	_ Endpoint = (*TCP)(nil)
	_ Endpoint = (*Inproc)(nil)

	_ WaitNotifier  = (*TCP)(nil)
	_ WaitNotifier  = (*Hybrid)(nil)
	_ WaitNotifier  = (*Inproc)(nil)
	_ FailureSignal = (*TCP)(nil)
	_ FailureSignal = (*Hybrid)(nil)
	_ FailureSignal = (*Inproc)(nil)
)
