package backend

import (
	"errors"

	"github.com/gocomm/comm/core"
)

// UserOp is a reduction the caller defined (comm.NewOp), handed to the
// backend in Request.User when Request.Op is its handle (Op.IsUser()).
// It is read-only and may be shared by concurrent requests.
type UserOp struct {
	// Name is the caller's name for the op, for errors.
	Name string
	// DType is the element type the function reduces.
	DType core.DType
	// Commutative says a ⊕ b == b ⊕ a; when false, a backend must combine
	// in rank order (the result is r0 ⊕ r1 ⊕ ... ⊕ rN-1).
	Commutative bool
	// Reduce sets inout[i] = inout[i] ⊕ in[i] for every element of the
	// raw little-endian element bytes (len(inout) == len(in), a multiple
	// of DType.Size()): inout is the left operand. It reads in, writes
	// only inout and keeps neither; it returns an error (a panic of the
	// caller's function, recovered) instead of panicking. It may be called
	// concurrently, on pieces of a message of any length.
	Reduce func(inout, in []byte) error
}

// ErrUserOpUnsupported is returned by backends that cannot run
// user-defined ops (Request.User), wrapped in an error naming the op and
// the backend.
var ErrUserOpUnsupported = errors.New("comm: user-defined reduce ops are not supported by this backend")

// UserOpRunner is implemented by communicators that say whether they run
// user-defined ops (Request.User). The comm package refuses such an op
// before anything is sent on a communicator whose UserOps returns an
// error, or that does not implement UserOpRunner.
type UserOpRunner interface {
	// UserOps returns nil if the backend runs user-defined ops, else an
	// error wrapping ErrUserOpUnsupported that names the backend and
	// what it runs instead.
	UserOps() error
}
