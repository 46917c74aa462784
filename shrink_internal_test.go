package comm

import (
	"context"
	"strings"
	"testing"
	"time"
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
