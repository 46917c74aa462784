package comm

import (
	"errors"

	"github.com/gocomm/comm/core"
)

// Errors returned by gocomm, matched with errors.Is. Failures of an
// operation come wrapped in an *OpError that names the operation, the rank,
// the peer and the sequence number.
var (
	// ErrClosed: the communicator (or its world) was closed.
	ErrClosed = core.ErrClosed
	// ErrAborted: an earlier failure, on this rank or another, aborted the
	// world; the chain holds the cause.
	ErrAborted = core.ErrAborted
	// ErrPeerLost: a peer died or its connection broke.
	ErrPeerLost = core.ErrPeerLost
	// ErrPeerClosed: a peer closed its communicator while this rank needed it.
	ErrPeerClosed = core.ErrPeerClosed
	// ErrMismatch: ranks called different collectives (or the same one with
	// different counts, roots, types or ops) at the same point.
	ErrMismatch = core.ErrMismatch
	// ErrLength: a message's length differs from what this rank expected
	// (split sizes or counts that disagree across ranks).
	ErrLength = core.ErrLength
	// ErrBarrierTimeout: some ranks did not reach a MonitoredBarrier in time.
	ErrBarrierTimeout = core.ErrBarrierTimeout
	// ErrInvalid: an argument is wrong (length, root, rank, op for the type,
	// counts); the message says what to fix. Returned before anything is
	// sent. A collective's invalid argument aborts the world, and the
	// other ranks' errors name this rank and say "invalid call".
	ErrInvalid = core.ErrInvalid
	// ErrNotMember: this rank is not a member of the group it used.
	ErrNotMember = errors.New("comm: this rank is not a member of the group")
)

// OpError is the error of a failed operation.
type OpError = core.OpError

// MismatchError reports a collective called differently across ranks.
type MismatchError = core.MismatchError

// BarrierError names the ranks that missed a MonitoredBarrier.
type BarrierError = core.BarrierError
