//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// process is the MPI library's state in this process. MPI itself is
// per process (one MPI_Init, one MPI_Finalize, one MPI_COMM_WORLD), so this
// is the package's one piece of process-wide state besides the driver
// registration; worlds and groups hold everything else.
type process struct {
	mu       sync.Mutex // protects the fields below
	state    procState
	initErr  error       // why initialisation failed (state procFailed)
	refs     int         // worlds (and Bootstraps) using MPI
	owner    bool        // this package initialised MPI, so it finalises it
	provided int         // the thread level MPI granted
	tagUB    int         // MPI_TAG_UB
	calls    chan func() // run on the MPI thread, in order
	// abandoned holds requests MPI may still use after their operation
	// gave up on them; they stay pinned (a Pinner must not be dropped
	// while pinned) until MPI_Finalize has returned.
	abandoned []*request
}

type procState int

const (
	procNew procState = iota
	procRunning
	procFinalized
	procFailed
)

var proc process

// startThread starts the MPI thread: one goroutine locked to its OS thread
// for good, which initialises and finalises MPI and, for funnelled worlds,
// makes every other MPI call too. It ends after MPI_Finalize, taking its
// thread with it.
func (p *process) startThread() {
	p.calls = make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		for f := range p.calls {
			f()
		}
	}()
}

// onThread runs f on the MPI thread and waits for it.
func (p *process) onThread(f func()) {
	done := make(chan struct{})
	p.calls <- func() {
		f()
		close(done)
	}
	<-done
}

// acquire initialises MPI on first use (asking for thread level want) and
// counts one more user.
func (p *process) acquire(want C.int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case procFinalized:
		return fmt.Errorf("%w: MPI was finalized in this process (when its last mpi world closed) and cannot be initialized again; keep one world open for the life of the program", ErrUnavailable)
	case procFailed:
		return p.initErr
	case procNew:
		p.startThread()
		var rc, provided, already C.int
		p.onThread(func() { rc = C.gc_init(want, &provided, &already) })
		if err := mpiError("MPI_Init_thread", rc); err != nil {
			p.state, p.initErr = procFailed, fmt.Errorf("%w: %w", ErrUnavailable, err)
			close(p.calls)
			return p.initErr
		}
		p.owner = already == 0
		p.provided = int(provided)
		if !p.owner && provided < C.MPI_THREAD_SERIALIZED {
			p.state = procFailed
			p.initErr = fmt.Errorf("%w: the program initialized MPI with thread level %s; the mpi backend needs MPI_THREAD_SERIALIZED or better when it does not initialize MPI itself (call MPI_Init_thread with MPI_THREAD_MULTIPLE, or let gocomm initialize MPI)", ErrUnavailable, threadLevel(p.provided))
			close(p.calls)
			return p.initErr
		}
		p.onThread(func() { p.tagUB = int(C.gc_tag_ub()) })
		p.state = procRunning
	}
	p.refs++
	return nil
}

// release drops one user; the last one finalises MPI (when this package
// initialised it), waiting at most bound for MPI_Finalize, which in Open
// MPI waits for every rank.
func (p *process) release(bound time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != procRunning {
		return nil
	}
	p.refs--
	if p.refs > 0 || !p.owner {
		return nil
	}
	p.state = procFinalized
	done := make(chan C.int, 1)
	p.calls <- func() { done <- C.MPI_Finalize() }
	close(p.calls) // the thread exits after MPI_Finalize
	select {
	case rc := <-done:
		if err := mpiError("MPI_Finalize", rc); err != nil {
			return err
		}
		for _, r := range p.abandoned {
			r.pin.Unpin()
		}
		p.abandoned = nil
		return nil
	case <-time.After(bound):
		return fmt.Errorf("comm: mpi backend: MPI_Finalize did not return within %v (a rank is gone, stuck, or has not closed its world); the process may exit", bound)
	}
}

// abandon keeps r, which MPI may still use, pinned and alive.
func (p *process) abandon(r *request) {
	p.mu.Lock()
	p.abandoned = append(p.abandoned, r)
	p.mu.Unlock()
}

func threadLevel(l int) string {
	switch C.int(l) {
	case C.MPI_THREAD_SINGLE:
		return "MPI_THREAD_SINGLE"
	case C.MPI_THREAD_FUNNELED:
		return "MPI_THREAD_FUNNELED"
	case C.MPI_THREAD_SERIALIZED:
		return "MPI_THREAD_SERIALIZED"
	case C.MPI_THREAD_MULTIPLE:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("thread level %d", l)
}
