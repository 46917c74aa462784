//go:build !mpi || !cgo

package mpi

import (
	"context"
	"fmt"

	"github.com/gocomm/comm/backend"
)

// The stub registers the driver names too, so that choosing the mpi
// backend in a build without it says how to get it.
func init() {
	backend.Register(Name, Driver{})
	backend.Register(FunneledName, Driver{Funneled: true})
}

var (
	_ backend.Driver       = Driver{}
	_ backend.Bootstrapper = Driver{}
)

func unavailable() error {
	return fmt.Errorf("%w: the mpi backend needs cgo and -tags mpi: go build -tags mpi ..., with an MPI installed (apt-get install libopenmpi-dev openmpi-bin)", ErrUnavailable)
}

// Open fails: this build has no MPI.
func (Driver) Open(context.Context, backend.Config) (backend.Comm, error) {
	return nil, unavailable()
}

// Bootstrap fails: this build has no MPI.
func Bootstrap(ctx context.Context, host string) (BootstrapInfo, error) {
	return BootstrapInfo{}, unavailable()
}

// Available reports whether this build has MPI (false: built without
// cgo or -tags mpi).
func Available() bool { return false }

// Available reports false: comm.Init, finding the driver through
// backend.Bootstrapper, does not offer to meet through MPI.
func (Driver) Available() bool { return false }

// Bootstrap fails, as the package's Bootstrap does: this build has no MPI.
func (Driver) Bootstrap(ctx context.Context, listenHost string) (backend.BootstrapInfo, error) {
	return backend.BootstrapInfo{}, unavailable()
}
