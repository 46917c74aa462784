//go:build mpi && cgo && mpich

package mpi

// MPICH (Debian/Ubuntu: libmpich-dev), chosen with -tags mpi,mpich.

// #cgo pkg-config: mpich
import "C"
