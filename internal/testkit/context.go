package testkit

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends after d, or when the test ends,
// whichever comes first: the deadline under which a test's ranks run, so
// that a hang fails the test instead of stalling the suite.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
