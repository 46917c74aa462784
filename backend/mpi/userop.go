//go:build mpi && cgo

package mpi

import (
	"fmt"

	"github.com/gocomm/comm/backend"
)

var _ backend.UserOpRunner = (*Comm)(nil)

// UserOps says that this backend runs no user-defined reduce ops: MPI
// would call them back from inside MPI_Allreduce and friends, on its own
// threads and with no way to stop the collective on every rank when the
// Go function panics. It runs the built-in ops, and PreMulSum (the comm
// package scales the inputs and asks for a Sum).
func (c *Comm) UserOps() error {
	return fmt.Errorf("%w: the mpi backend runs Sum, Prod, Min, Max, Avg, BAnd, BOr, BXor and PreMulSum only; run user-defined ops on the native backend (GOCOMM_BACKEND=native)", backend.ErrUserOpUnsupported)
}
