//go:build mpi && cgo

package mpi

import "testing"

// TestKeepScheduledPaces checks that a communicator's MPI calls pass
// through the Go scheduler once per schedulerPace, and not more often: a
// loop of blocking collectives never blocks in Go, and without these
// passes sysmon takes its P from inside MPI (see schedulerPace).
func TestKeepScheduledPaces(t *testing.T) {
	calls := 0
	old := gosched
	gosched = func() { calls++ }
	defer func() { gosched = old }()

	var p pace
	start := int64(5 * schedulerPace)
	steps := []struct {
		at   int64
		want bool
	}{
		{start, true},                        // the first call passes
		{start + 1, false},                   // then not for a while
		{start + schedulerPace - 1, false},   // still not
		{start + schedulerPace, true},        // one pace later it does
		{start + schedulerPace + 10, false},  // and the pace starts again
		{start + 3*schedulerPace + 10, true}, // a long gap: once, not per missed pace
		{start + 3*schedulerPace + 20, false},
	}
	want := 0
	for i, s := range steps {
		if got := p.keepScheduledAt(s.at); got != s.want {
			t.Fatalf("step %d (t=%d): keepScheduledAt = %v, want %v", i, s.at, got, s.want)
		}
		if s.want {
			want++
		}
	}
	if calls != want {
		t.Fatalf("runtime.Gosched called %d times, want %d", calls, want)
	}
}
