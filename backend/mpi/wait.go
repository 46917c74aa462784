//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"context"
	"time"

	"github.com/gocomm/comm/core"
)

// Polling. Open MPI advances nonblocking operations only inside MPI calls,
// so a waiting operation tests its request in a loop: a spin of
// spinPolls tests, sched_yield between tests until yieldFor has passed (so
// that oversubscribed ranks give their core to the rank that needs it),
// then sleeps growing to maxSleep.
const (
	spinPolls      = 64
	yieldFor       = time.Millisecond
	maxSleep       = 200 * time.Microsecond
	abortPollEvery = 32 // tests of a request between looks for abort notices
)

type poller struct {
	n     int
	start time.Time
}

func (p *poller) pause() {
	p.n++
	switch {
	case p.n < spinPolls:
	case p.n == spinPolls:
		p.start = time.Now()
	default:
		el := time.Since(p.start)
		if el < yieldFor {
			yieldThread()
			return
		}
		time.Sleep(min(el/16, maxSleep))
	}
}

// lookForAbort says whether this poll should also test for abort notices.
func (p *poller) lookForAbort() bool { return p.n%abortPollEvery == abortPollEvery-1 }

// test tests r once (and the abort notices when asked), where this
// communicator may call MPI. It returns -1 while r is pending, else MPI's
// return code.
func (c *Comm) test(r *request, abort bool) C.int {
	if !c.w.funneled {
		rc := C.gc_test(r.c)
		if abort && rc < 0 {
			c.w.pollAbort()
		}
		return rc
	}
	var rc C.int
	c.w.p.onThread(func() {
		rc = C.gc_test(r.c)
		if abort && rc < 0 {
			c.w.pollAbort()
		}
	})
	return rc
}

// wait polls r until MPI completes it and returns MPI's return code, or
// stops early with the reason: ctx's error, the world's failure, or
// core.ErrClosed. r is then still in MPI's hands.
func (c *Comm) wait(ctx context.Context, r *request) (C.int, error) {
	return c.waitUntil(ctx, r, nil)
}

// waitUntil is wait that also stops, with errDeadline, when deadline fires.
func (c *Comm) waitUntil(ctx context.Context, r *request, deadline <-chan time.Time) (C.int, error) {
	var p poller
	done := ctx.Done()
	for {
		if rc := c.test(r, p.lookForAbort()); rc >= 0 {
			return rc, nil
		}
		if err := c.stopped(ctx, done, deadline); err != nil {
			return 0, err
		}
		c.pace.keepScheduled()
		p.pause()
	}
}

// stopped says why a wait must end now, if it must. It runs between every
// two tests, so it avoids locks: atomic flags, and one-channel selects
// (which look at an empty channel without locking it).
func (c *Comm) stopped(ctx context.Context, done <-chan struct{}, deadline <-chan time.Time) error {
	if c.w.failedFlag.Load() {
		return c.w.failure()
	}
	if c.gate.closedFlag.Load() {
		return core.ErrClosed
	}
	select {
	case <-done:
		return ctx.Err()
	default:
	}
	select {
	case <-deadline:
		return errDeadline
	default:
	}
	return nil
}

// errDeadline ends waitUntil at its deadline.
var errDeadline = deadlineError{}

type deadlineError struct{}

func (deadlineError) Error() string { return "deadline" }

// cancelRecv withdraws a pending receive (MPI_Cancel) and waits for MPI to
// confirm. It reports whether the receive was cancelled; false means it
// completed after all (with MPI's return code rc), or that MPI did not
// confirm in time, in which case r was abandoned.
func (c *Comm) cancelRecv(r *request) (cancelled bool, rc C.int, confirmed bool) {
	c.do(func() { C.gc_cancel(r.c) })
	var p poller
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if rc = c.test(r, false); rc >= 0 {
			var k C.int
			c.do(func() { k = C.gc_cancelled(r.c) })
			return k != 0, rc, true
		}
		p.pause()
	}
	r.abandon()
	return false, 0, false
}
