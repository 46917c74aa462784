//go:build race

package transport

// raceEnabled: the race detector is on (sync.Pool drops some of what it
// is given, so pooled paths allocate).
const raceEnabled = true
