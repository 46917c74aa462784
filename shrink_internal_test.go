package comm

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/rendezvous"
)

// TestParseMembers: the membership read from the store is strictly
// increasing ranks of the old world; a rank twice is refused.
func TestParseMembers(t *testing.T) {
	if ms, err := parseMembers([]byte("[0,2,3]"), 4); err != nil || len(ms) != 3 {
		t.Errorf("[0,2,3] of 4: %v, %v", ms, err)
	}
	for _, bad := range []string{"[1,1,3]", "[2,1]", "[]", "[0,4]", "[-1,0]", "nope"} {
		if ms, err := parseMembers([]byte(bad), 4); err == nil || !strings.Contains(err.Error(), "membership") {
			t.Errorf("%s of 4: %v, %v; want an error about the membership", bad, ms, err)
		}
	}
}

// TestShrinkSettle: without a deadline a Shrink settles for a quarter of
// the timeout, at most 30 s; with one, for half the time left.
func TestShrinkSettle(t *testing.T) {
	if got := shrinkSettle(context.Background(), 8*time.Second); got != 2*time.Second {
		t.Errorf("no deadline, timeout 8s: %v, want 2s", got)
	}
	if got := shrinkSettle(context.Background(), 30*time.Minute); got != 30*time.Second {
		t.Errorf("no deadline, timeout 30m: %v, want 30s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := shrinkSettle(ctx, time.Hour); got > 5*time.Second || got < 4*time.Second {
		t.Errorf("10s deadline: %v, want about 5s", got)
	}
}

// TestAgreeSurvivorsLeaderDies: the lowest survivor, which writes the
// membership, dies after posting that it is alive and before deciding;
// the next survivor decides after its turn, and every live survivor gets
// the same membership within the time bound (the dead leader is in it:
// opening the new world then fails naming it, and a second Shrink, which
// knows it dead, leaves it out).
func TestAgreeSurvivorsLeaderDies(t *testing.T) {
	store := rendezvous.NewMemStore()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const base, size, settle = "t", 4, 400 * time.Millisecond
	// Rank 0 posts that it is alive, then dies; rank 3 is gone already.
	if err := store.Set(ctx, base+"/alive/0", []byte(`{"dead":[]}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := make([][]int, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for _, r := range []int{1, 2} {
		wg.Go(func() { got[r], errs[r] = agreeSurvivors(ctx, store, base, size, r, []int{3}, settle) })
	}
	wg.Wait()
	for _, r := range []int{1, 2} {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !slices.Equal(got[r], []int{0, 1, 2}) {
			t.Errorf("rank %d agreed on %v, want [0 1 2]", r, got[r])
		}
	}
	// Settled at once (rank 3 is known dead, rank 0 posted), then rank 1
	// waits one leader's turn, max(settle/4, 200ms), for rank 0.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to agree without the leader", d)
	}
}
