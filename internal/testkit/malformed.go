package testkit

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// MalformedOutcome runs call on its own goroutine and reports a panic or a
// hang as a problem of the test's own: a panic, an error caused by the
// call's context deadline (the call waited instead of refusing), or no
// return within deadline plus 5 s. The malformed-call tests of every
// package that takes user input run their cases through it.
func MalformedOutcome(deadline time.Duration, call func() error) (problem string, err error) {
	type result struct {
		err   error
		panic string
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: fmt.Sprintf("panic: %v\n%s", p, debug.Stack())}
			}
		}()
		done <- result{err: call()}
	}()
	select {
	case r := <-done:
		if r.panic != "" {
			return r.panic, nil
		}
		if errors.Is(r.err, context.DeadlineExceeded) {
			return "hung until the deadline: " + r.err.Error(), r.err
		}
		return "", r.err
	case <-time.After(deadline + 5*time.Second):
		return "hung: no return within the deadline", nil
	}
}

// CheckMalformedError says what is wrong with err as the answer to a
// malformed call ("" if nothing): it must be a comm:-prefixed error
// wrapping want (when set) and containing says.
func CheckMalformedError(err, want error, says string) string {
	switch {
	case err == nil:
		return "returned no error"
	case !strings.HasPrefix(err.Error(), "comm:"):
		return fmt.Sprintf("error not comm:-prefixed: %v", err)
	case want != nil && !errors.Is(err, want):
		return fmt.Sprintf("error does not wrap %v: %v", want, err)
	case !strings.Contains(err.Error(), says):
		return fmt.Sprintf("error does not say %q: %v", says, err)
	}
	return ""
}
