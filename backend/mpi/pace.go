//go:build mpi && cgo

package mpi

import (
	"runtime"
	"sync/atomic"

	"github.com/gocomm/comm/internal/clock"
)

// schedulerPace is how long a communicator's MPI calls run one after
// another before the goroutine making them passes through the Go
// scheduler (keepScheduled).
//
// Why: Go's system monitor (sysmon) forcibly preempts a goroutine that has
// run for 10 ms without being rescheduled. A goroutine that spends that
// time in cgo calls (a loop of small blocking collectives: each is one cgo
// call into MPI) cannot be preempted, so sysmon takes its P from the
// thread inside the call instead, and having taken a P it keeps waking
// every ~20-100 us, taking it again whenever it catches the thread in MPI.
// On a rank bound to one core (mpirun's default) each of those wakes is a
// context switch on the core the rank spins on, and the peer waits too:
// a loop of small cgo collectives runs about twice as slow per call as the
// same loop inside one C call, and a Gosched every so often (this pace)
// removes the difference; the trade is one clock read per call (see
// docs/performance.md).
const schedulerPace = 250_000 // nanoseconds (clock.Nanos)

// pace is a communicator's record of its last pass through the scheduler.
type pace struct{ last atomic.Int64 }

// keepScheduled runs runtime.Gosched if schedulerPace has passed since the
// last time it did for this communicator. It costs one clock read
// otherwise. The record is per communicator, not per goroutine: a
// communicator's blocking collectives run one at a time, usually from
// one goroutine.
func (p *pace) keepScheduled() { p.keepScheduledAt(clock.Nanos()) }

// keepScheduledAt is keepScheduled at time now (clock.Nanos); it reports
// whether it passed through the scheduler.
func (p *pace) keepScheduledAt(now int64) bool {
	if now-p.last.Load() < schedulerPace {
		return false
	}
	p.last.Store(now)
	schedulerPasses.Add(1)
	gosched()
	return true
}

// schedulerPasses counts keepScheduled's passes through the scheduler, for
// tests.
var schedulerPasses atomic.Int64

// gosched is runtime.Gosched; tests count the calls.
var gosched = runtime.Gosched
