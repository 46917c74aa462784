//go:build mpi && cgo && !mpich

package mpi

// Open MPI (Debian/Ubuntu: libopenmpi-dev). For another MPI, build with
// -tags mpi,mpich or set CGO_CFLAGS/CGO_LDFLAGS from `mpicc --showme`.

// #cgo pkg-config: ompi-c
import "C"
