package testkit

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that several goroutines may write while
// the test reads it: a child process's stdout and stderr, a logger. The
// zero value is ready to use; Write and String may be called concurrently.
type LockedBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

// Write appends p; it does not keep p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns a copy of what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
