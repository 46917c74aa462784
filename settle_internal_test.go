package comm

import (
	"testing"
	"time"

	"github.com/gocomm/comm/backend"
)

// TestSettleSpendsItsTime: settle returns no sooner than d.
func TestSettleSpendsItsTime(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, 20 * time.Millisecond} {
		start := time.Now()
		settle(d)
		if got := time.Since(start); got < d {
			t.Errorf("settle(%v) returned after %v", d, got)
		}
	}
}

type settlingBackend struct {
	backend.Comm
	d time.Duration
}

func (s settlingBackend) SettleTime() time.Duration { return s.d }

// TestSettleTime: GOCOMM_SETTLE wins, else the backend's default, else 0.
func TestSettleTime(t *testing.T) {
	for _, tt := range []struct {
		env  string
		be   backend.Comm
		want time.Duration
	}{
		{"", settlingBackend{d: 10 * time.Millisecond}, 10 * time.Millisecond},
		{"", nil, 0},
		{"GOCOMM_SETTLE=25ms", nil, 25 * time.Millisecond},
		{"GOCOMM_SETTLE=0", settlingBackend{d: 10 * time.Millisecond}, 0},
		{"GOCOMM_SETTLE=off", settlingBackend{d: 10 * time.Millisecond}, 0},
		{"GOCOMM_SETTLE=3ms", settlingBackend{d: 10 * time.Millisecond}, 3 * time.Millisecond},
	} {
		cfg, err := resolve(Options{Getenv: envOf(tt.env)})
		if err != nil {
			t.Fatalf("%q: %v", tt.env, err)
		}
		if got := settleTime(cfg, tt.be); got != tt.want {
			t.Errorf("%q, backend %T: settle %v, want %v", tt.env, tt.be, got, tt.want)
		}
	}
}
