//go:build race && mpi && cgo

package mpi_test

// raceMPI: the race detector's sync.Pool drops items at random, so the
// comm package's recycled requests are sometimes allocated afresh.
const raceMPI = true
