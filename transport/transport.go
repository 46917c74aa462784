package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
)

// AnySource as the peer of Recv matches a message from any peer.
const AnySource = -1

// Signature describes the operation a message belongs to. Every frame carries
// the sender's signature; a receiver whose own signature for the same
// (communicator, sequence number) differs fails with a *MismatchError naming
// both calls instead of hanging or mixing data.
type Signature struct {
	Kind  backend.Kind
	DType backend.DType
	Op    backend.Op
	Algo  uint8 // algo.Algorithm of the schedule; ranks must run the same one
	Root  int32
	Count uint64 // the count every rank must agree on (see comm for each op)
}

func (s Signature) String() string {
	desc := fmt.Sprintf("%v(%v, count %d", s.Kind, s.DType, s.Count)
	switch s.Kind {
	case backend.KindAllReduce, backend.KindReduceScatter, backend.KindReduceScatterV:
		desc += ", " + s.Op.String()
	case backend.KindReduce:
		desc += fmt.Sprintf(", %v, root %d", s.Op, s.Root)
	case backend.KindBroadcast, backend.KindGather, backend.KindGatherV, backend.KindScatter, backend.KindScatterV:
		desc += fmt.Sprintf(", root %d", s.Root)
	}
	return desc + ")"
}

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

// SendStarter is implemented by endpoints that can start some sends
// without waiting and finish them later: a single-copy send to a peer on
// this host only publishes where the message is, and is done once the peer
// has copied it, which needs nothing more from the sender. A caller can
// then receive on the same goroutine meanwhile instead of running the send
// on a goroutine of its own.
type SendStarter interface {
	// SendsStartable reports whether StartSend of n bytes to peer starts
	// a send in progress (else it sends at once, as Send does).
	SendsStartable(peer, n int) bool
	// StartSend starts sending payload to peer. finish must be called
	// exactly once, before payload is modified or reused; it waits until
	// the send is done and returns Send's error.
	StartSend(ctx context.Context, peer int, h Header, payload []byte) (finish func(context.Context) error)
}

// Errors. They are matched with errors.Is; the comm package re-exports them.
var (
	// ErrClosed: the local endpoint was closed.
	ErrClosed = errors.New("comm: communicator closed")
	// ErrAborted: the communicator was aborted after an earlier failure, on
	// this rank or another; the error chain holds the cause.
	ErrAborted = errors.New("comm: communicator aborted")
	// ErrPeerLost: a peer's connection broke without a goodbye (crash, kill,
	// network failure). Returned inside a *PeerError.
	ErrPeerLost = errors.New("comm: peer connection lost")
	// ErrPeerClosed: a peer closed its communicator while this rank still
	// needed it. Returned inside a *PeerError.
	ErrPeerClosed = errors.New("comm: peer closed the communicator")
	// ErrMismatch: ranks called different collectives at the same sequence
	// number. Returned inside a *MismatchError.
	ErrMismatch = errors.New("comm: collective mismatch across ranks")
	// ErrLength: a message's length differs from the receive buffer's.
	ErrLength = errors.New("comm: message length mismatch")
	// ErrHandshake: a connection failed the handshake (wrong magic, version,
	// secret or rank) and was refused.
	ErrHandshake = errors.New("comm: handshake refused")
	// ErrBadPeer: Send or Recv named a peer outside the world, or this rank
	// itself (endpoints never talk to themselves).
	ErrBadPeer = errors.New("comm: invalid peer rank")
)

// AbortError is the error of every pending and later operation on an
// endpoint that was aborted locally: by Abort(Cause), or because a peer's
// connection broke (Cause is then a *PeerError wrapping ErrPeerLost).
// errors.Is(err, ErrAborted) holds, and errors.Is/As also see Cause.
// An endpoint aborted by a peer's Abort returns *RemoteAbortError instead.
type AbortError struct {
	Cause error
}

func (e *AbortError) Error() string {
	if e.Cause == nil {
		return ErrAborted.Error()
	}
	return ErrAborted.Error() + ": " + e.Cause.Error()
}

// Unwrap returns ErrAborted and Cause, so errors.Is matches both.
func (e *AbortError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrAborted}
	}
	return []error{ErrAborted, e.Cause}
}

// Compile-time checks that both implementations satisfy Endpoint.
var (
	_ Endpoint = (*TCP)(nil)
	_ Endpoint = (*Inproc)(nil)
)

// PeerError says which peer an error concerns.
type PeerError struct {
	Peer int
	Err  error
}

func (e *PeerError) Error() string { return fmt.Sprintf("rank %d: %v", e.Peer, e.Err) }
func (e *PeerError) Unwrap() error { return e.Err }

// RemoteAbortError is the error of an endpoint aborted because a peer aborted.
type RemoteAbortError struct {
	Peer   int
	Reason string
}

func (e *RemoteAbortError) Error() string {
	return fmt.Sprintf("comm: communicator aborted by rank %d: %s", e.Peer, e.Reason)
}
func (e *RemoteAbortError) Unwrap() error { return ErrAborted }

// MismatchError reports that a peer called a different operation at the
// same sequence number.
type MismatchError struct {
	Peer          int
	Seq           uint64
	Local, Remote Signature
}

func (e *MismatchError) Error() string {
	msg := fmt.Sprintf("comm: collective mismatch at sequence %d: this rank called %v but rank %d called %v",
		e.Seq, e.Local, e.Peer, e.Remote)
	if e.Local.String() == e.Remote.String() {
		// The calls read alike: say which hidden field differs.
		msg += " (" + e.Local.diff(e.Remote, e.Peer) + ")"
	}
	return msg
}

// diff describes the fields in which s (this rank's) and other (peer's)
// differ, for the mismatches that String does not show.
func (s Signature) diff(other Signature, peer int) string {
	var d []string
	field := func(name string, here, there any) {
		d = append(d, fmt.Sprintf("%s %v here, %v on rank %d", name, here, there, peer))
	}
	if s.Kind != other.Kind {
		field("operation", s.Kind, other.Kind)
	}
	if s.DType != other.DType {
		field("element type", s.DType, other.DType)
	}
	if s.Op != other.Op {
		field("reduce op", s.Op, other.Op)
	}
	if s.Root != other.Root {
		field("root", s.Root, other.Root)
	}
	if s.Count != other.Count {
		field("count", s.Count, other.Count)
	}
	if s.Algo != other.Algo {
		field("algorithm", algo.Algorithm(s.Algo), algo.Algorithm(other.Algo))
		d = append(d, "the ranks chose different schedules: pass the same arguments on every rank, or force one algorithm with GOCOMM_ALGO_<OP>")
	}
	if len(d) == 0 {
		return "the signatures are identical"
	}
	return strings.Join(d, "; ")
}
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// LengthError reports a message whose length differs from the buffer posted
// for it.
type LengthError struct {
	Peer      int
	Got, Want int
}

func (e *LengthError) Error() string {
	return fmt.Sprintf("comm: rank %d sent %d bytes where this rank expected %d (counts or split sizes disagree across ranks)",
		e.Peer, e.Got, e.Want)
}
func (e *LengthError) Unwrap() error { return ErrLength }
