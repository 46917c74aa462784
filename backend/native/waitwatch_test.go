package native

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeNotifier records notices and answers PeerWaiting from a table.
type fakeNotifier struct {
	mu      sync.Mutex
	notes   []int       // ranks noted, -1 for a retraction
	waiting map[int]int // peer -> whom it waits for
}

func (f *fakeNotifier) NoteWaiting(rank int, valid time.Duration) {
	f.mu.Lock()
	f.notes = append(f.notes, rank)
	f.mu.Unlock()
}

func (f *fakeNotifier) PeerWaiting(peer int) int {
	if r, ok := f.waiting[peer]; ok {
		return r
	}
	return -1
}

func (f *fakeNotifier) noted() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.notes)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

// TestWaitWatch: a short wait is never told; a long one is, and renewed;
// its end is retracted at once; the watcher stops when nothing waits.
func TestWaitWatch(t *testing.T) {
	f := &fakeNotifier{}
	w := &waitWatch{wn: f, interval: 20 * time.Millisecond, poke: make(chan struct{}, 1), stop: make(chan struct{})}
	defer w.close()
	w.begin(3) // short
	w.done()
	time.Sleep(100 * time.Millisecond)
	if n := f.noted(); len(n) != 0 {
		t.Fatalf("a wait that ended at once was told: %v", n)
	}
	w.begin(2)
	waitFor(t, "a long wait was not renewed", func() bool { return len(f.noted()) >= 2 })
	for _, r := range f.noted() {
		if r != 2 {
			t.Fatalf("notices %v, want rank 2 only", f.noted())
		}
	}
	w.done()
	waitFor(t, "the end of the wait was not retracted", func() bool { n := f.noted(); return n[len(n)-1] == -1 })
	waitFor(t, "the watcher did not stop once nothing waited", func() bool { return !w.running.Load() })
}

// TestWaitChain: the chain follows the notices, and stops at a rank seen
// before (a cycle) or at this rank.
func TestWaitChain(t *testing.T) {
	w := &waitWatch{wn: &fakeNotifier{waiting: map[int]int{1: 3, 3: 4, 4: 1, 5: 0}}}
	for _, tc := range []struct {
		peer int
		want []int
	}{
		{2, nil},         // 2 said nothing
		{1, []int{3, 4}}, // 1 waits for 3, 3 for 4, 4 for 1 again
		{5, nil},         // 5 waits for this rank (0)
		{3, []int{4, 1}}, // 3 -> 4 -> 1 -> 3 again
		{4, []int{1, 3}}, // 4 -> 1 -> 3 -> 4 again
		{6, []int(nil)},  // unknown
		{0, []int(nil)},  // this rank itself
		{-1, []int(nil)}, // nobody
		{42, []int(nil)}, // outside
	} {
		if got := w.chain(0, tc.peer); !slices.Equal(got, tc.want) {
			t.Errorf("chain from %d: %v, want %v", tc.peer, got, tc.want)
		}
	}
	var none *waitWatch
	if got := none.chain(0, 1); got != nil {
		t.Errorf("a nil watch's chain: %v", got)
	}
}

// BenchmarkWaitMarks is what marking waits costs a collective of four
// waits (two peers, each twice in a row, as a ring's steps alternate
// receiving and reducing), the watcher running, against the same calls on
// no watch (a world of two) in the same run.
func BenchmarkWaitMarks(b *testing.B) {
	collective := func(w *waitWatch) {
		w.begin(1)
		w.begin(1)
		w.begin(2)
		w.begin(2)
		w.done()
	}
	b.Run("none", func(b *testing.B) {
		var w *waitWatch
		for b.Loop() {
			collective(w)
		}
	})
	b.Run("marked", func(b *testing.B) {
		w := &waitWatch{wn: &fakeNotifier{}, interval: time.Second, poke: make(chan struct{}, 1), stop: make(chan struct{})}
		defer w.close()
		for b.Loop() {
			collective(w)
		}
	})
}
