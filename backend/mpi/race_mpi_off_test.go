//go:build !race && mpi && cgo

package mpi_test

const raceMPI = false
