package transport

import "sync/atomic"

// failure is a mailbox's terminal state: once set (an abort, a lost peer
// an operation needed, or Close), every operation fails with it. Its
// fields but failedCh and hasFailed are guarded by mailbox.mu.
type failure struct {
	failedCh chan struct{} // closed when err is first set
	// hasFailed is set just before failedCh is closed: polling loops read
	// it on every pass, which a channel select costs several times more
	// for (a select there was a large part of a small collective's time).
	hasFailed atomic.Bool

	err    error // set once aborted or closed; every later op fails with it
	closed bool  // closed locally: later ops fail with ErrClosed
}

// init readies f, not failed.
func (f *failure) init() { f.failedCh = make(chan struct{}) }

// opErrLocked is the error every new operation fails with, or nil.
func (f *failure) opErrLocked() error {
	if f.closed {
		return ErrClosed
	}
	return f.err
}

// setLocked records err as the terminal error unless one is set already,
// and then tells the pollers (hasFailed) and the waiters (failedCh). It
// reports whether this call set it.
func (f *failure) setLocked(err error) bool {
	if f.err != nil {
		return false
	}
	f.err = err
	f.hasFailed.Store(true)
	close(f.failedCh)
	return true
}
