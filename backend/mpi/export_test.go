//go:build mpi && cgo

package mpi

import "github.com/gocomm/comm/backend"

// BenchIallreduce exposes benchIallreduce to the external tests.
func BenchIallreduce(be backend.Comm, iters int) error { return benchIallreduce(be.(*Comm), iters) }

// BenchAllreduce exposes benchAllreduce to the external tests.
func BenchAllreduce(be backend.Comm, iters int) error { return benchAllreduce(be.(*Comm), iters) }

// SchedulerPasses is how many times this process's MPI calls passed
// through the Go scheduler (pace.keepScheduled).
func SchedulerPasses() int64 { return schedulerPasses.Load() }
