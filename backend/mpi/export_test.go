//go:build mpi && cgo

package mpi

import "github.com/gocomm/comm/backend"

// BenchIallreduce exposes benchIallreduce to the external tests.
func BenchIallreduce(be backend.Comm, iters int) error { return benchIallreduce(be.(*Comm), iters) }

// BenchAllreduce exposes benchAllreduce to the external tests.
func BenchAllreduce(be backend.Comm, iters int) error { return benchAllreduce(be.(*Comm), iters) }
