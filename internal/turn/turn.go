// Package turn starts a communicator's collectives in sequence-number
// order. A backend whose collectives must start in the order the comm
// package numbered them (MPI matches collectives by the order they start;
// the native backend's shared-memory board numbers its operations alike
// on every rank) has each collective wait for its turn and, once it has
// started, let the next one go. The collective whose turn it is pays one
// atomic load; waiting happens only when collectives reach the backend out
// of order (Start forms on several goroutines).
package turn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Turn is one communicator's order. Its zero value expects sequence
// number 1 first. Sequence number 0 never waits.
type Turn struct {
	// started is the sequence number of the last collective let go; the
	// next to start is started+1. A collective whose turn it is reads it
	// and goes; one that must wait sets waiting and makes ch, under mu,
	// and Advance closes ch when it sees waiting (each stores its own
	// flag before it loads the other's, so one of them sees the other).
	started atomic.Uint64
	waiting atomic.Bool
	mu      sync.Mutex    // protects ch
	ch      chan struct{} // made by a waiter, closed when started moves
}

// ErrFailed is what Wait returns when its failed channel is closed; the
// caller replaces it with why its world failed.
var ErrFailed = errors.New("comm: the world failed while a collective waited for its turn")

// Wait returns once every collective with a smaller sequence number than
// seq has been let go (Advance), or with why not: ctx ended, failed closed
// (ErrFailed), closed closed (closedErr), or seq was let go already. Nil
// channels are never ready.
func (t *Turn) Wait(ctx context.Context, seq uint64, failed, closed <-chan struct{}, closedErr error) error {
	if seq == 0 {
		return nil
	}
	for {
		next := t.started.Load() + 1
		if next == seq {
			return nil
		}
		if seq < next {
			return fmt.Errorf("comm: collective %d was already started on this communicator", seq)
		}
		t.mu.Lock()
		t.waiting.Store(true)
		if t.started.Load()+1 != next {
			t.mu.Unlock()
			continue
		}
		if t.ch == nil {
			t.ch = make(chan struct{})
		}
		ch := t.ch
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w waiting for collective %d to be started before this one (%d)", ctx.Err(), next, seq)
		case <-failed:
			return ErrFailed
		case <-closed:
			return closedErr
		}
	}
}

// Ready reports whether the collective seq may start now: Wait would
// return at once.
func (t *Turn) Ready(seq uint64) bool { return seq == 0 || t.started.Load()+1 == seq }

// Advance lets the collective after seq start. Sequence number 0 does
// nothing.
func (t *Turn) Advance(seq uint64) {
	if seq == 0 {
		return
	}
	t.started.Store(seq)
	if !t.waiting.Load() {
		return
	}
	t.mu.Lock()
	t.waiting.Store(false)
	if t.ch != nil {
		close(t.ch)
		t.ch = nil
	}
	t.mu.Unlock()
}
