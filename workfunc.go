package comm

import "fmt"

// StartFunc runs fn in a new goroutine and returns a Work that is done when
// fn returns, carrying fn's error. Packages that build one operation out of
// several collectives (package onebit) return it from their Start
// functions, so callers wait on every operation the same way. Source of
// such a Work is -1. A nil fn gives a Work failed with ErrInvalid.
//
// The collectives fn issues are started from its goroutine, after
// StartFunc returns: the caller must not start other collectives on the
// same communicator until the Work is done, or ranks could match them in a
// different order.
func StartFunc(fn func() error) *Work {
	if fn == nil {
		return failed(fmt.Errorf("%w: StartFunc: nil function", ErrInvalid))
	}
	w := &Work{done: make(chan struct{}), source: -1}
	go func() {
		defer close(w.done)
		w.err = fn()
	}()
	return w
}
