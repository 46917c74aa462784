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
	// ErrInvalid: an argument is wrong; the message says what to fix. The
	// comm package re-exports it, and an abort whose cause wraps it tells
	// the peers that this rank made an invalid call (FailInvalid).
	ErrInvalid = errors.New("comm: invalid argument")
)

// FailureKind says how the rank that failed first failed, as an abort
// tells the peers (RemoteAbortError.Kind). The numbering is part of the
// wire format: append only.
type FailureKind uint8

// The failure kinds.
const (
	// FailUnknown: the abort said nothing about its root cause (an older
	// peer, or a backend that cannot tell).
	FailUnknown FailureKind = iota
	// FailLost: the rank's process died (killed, crashed, or exited while
	// others still needed it) or its connection broke.
	FailLost
	// FailTimeout: the rank was not heard from within the timeout.
	FailTimeout
	// FailInvalid: the rank made an invalid call (an argument error, a
	// value it could not encode) before or during the exchange.
	FailInvalid
	// FailMismatch: the rank's call differed from a peer's (operation,
	// count, root, type, op or message length).
	FailMismatch
	// FailClosed: the rank closed its communicator while others still
	// needed it.
	FailClosed
	// FailError: any other error on that rank, or Abort called by the
	// program; the reason says which.
	FailError
)

func (k FailureKind) String() string {
	switch k {
	case FailLost:
		return "lost (process killed or exited, or connection broken)"
	case FailTimeout:
		return "timed out"
	case FailInvalid:
		return "invalid call"
	case FailMismatch:
		return "mismatched call"
	case FailClosed:
		return "closed its communicator"
	case FailError:
		return "error"
	}
	return "unknown"
}

// RankFailure marks Err as the failure of world rank Rank (-1: the rank
// that aborts with it), of kind Kind, for Abort to pass on to the peers
// (see RemoteAbortError). It is transparent: its text is Err's, and
// errors.Is/As see through it. An abort cause without one is classified
// from its chain (RootCause).
type RankFailure struct {
	Rank int
	Kind FailureKind
	Err  error
}

func (e *RankFailure) Error() string { return e.Err.Error() }
func (e *RankFailure) Unwrap() error { return e.Err }

// RootCause says which world rank failed first and how, as far as err's
// chain tells: a remote abort's root cause (forwarded unchanged), a
// RankFailure, a lost or closed peer, a mismatch, an invalid argument;
// anything else is an error of self. It returns the reporter too: the rank
// that noticed the failure (self, unless err is a remote abort).
func RootCause(err error, self int) (origin int, kind FailureKind, reporter int) {
	var ra *RemoteAbortError
	if errors.As(err, &ra) {
		if ra.Kind == FailUnknown {
			return ra.Peer, FailError, ra.Peer
		}
		return ra.Origin, ra.Kind, ra.Reporter
	}
	var rf *RankFailure
	if errors.As(err, &rf) {
		if rf.Rank < 0 {
			return self, rf.Kind, self
		}
		return rf.Rank, rf.Kind, self
	}
	var pe *PeerError
	switch {
	case errors.As(err, &pe) && errors.Is(err, ErrPeerLost):
		return pe.Peer, FailLost, self
	case errors.As(err, &pe) && errors.Is(err, ErrPeerClosed):
		return pe.Peer, FailClosed, self
	case errors.Is(err, ErrMismatch), errors.Is(err, ErrLength):
		return self, FailMismatch, self
	case errors.Is(err, ErrInvalid):
		return self, FailInvalid, self
	}
	return self, FailError, self
}

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

// RemoteAbortError is the error of an endpoint aborted because a peer
// aborted. Peer is the rank whose abort arrived and Reason its text. Unless
// Kind is FailUnknown, Origin is the world rank that failed first, Kind
// how, and Reporter the world rank that noticed it (Peer, unless Peer
// passed the abort on): a rank that aborts because another did forwards
// the root cause unchanged, so every rank names the same first failure.
type RemoteAbortError struct {
	Peer     int
	Reason   string
	Origin   int
	Kind     FailureKind
	Reporter int
}

func (e *RemoteAbortError) Error() string {
	if e.Kind == FailUnknown {
		return fmt.Sprintf("comm: communicator aborted by rank %d: %s", e.Peer, e.Reason)
	}
	via := ""
	if e.Peer != e.Reporter {
		via = fmt.Sprintf(", passed on by rank %d", e.Peer)
	}
	return fmt.Sprintf("comm: communicator aborted: first failure: rank %d, %v; reported by rank %d%s: %s",
		e.Origin, e.Kind, e.Reporter, via, e.Reason)
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
