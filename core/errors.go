package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

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

// BarrierError is the error of a MonitoredBarrier that some ranks did not
// reach in time.
type BarrierError struct {
	Late    []int // communicator ranks that had not arrived (with WaitAll: all of them; else the first)
	Timeout time.Duration
}

// ErrBarrierTimeout is matched by every *BarrierError.
var ErrBarrierTimeout = errors.New("comm: monitored barrier timed out")

func (e *BarrierError) Error() string {
	s := make([]string, len(e.Late))
	for i, r := range e.Late {
		s[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("comm: rank(s) %s failed to pass MonitoredBarrier within %v", strings.Join(s, ", "), e.Timeout)
}

func (e *BarrierError) Unwrap() error { return ErrBarrierTimeout }

// OpError is the error of a failed operation: which operation, on which rank,
// at which sequence number, and which peer it concerned (-1 if none).
type OpError struct {
	Op   Kind
	Rank int
	Peer int
	Seq  uint64
	Err  error
}

func (e *OpError) Error() string {
	s := fmt.Sprintf("comm: %v (seq %d) on rank %d", e.Op, e.Seq, e.Rank)
	if e.Peer >= 0 {
		s += fmt.Sprintf(" with peer %d", e.Peer)
	}
	return s + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }
