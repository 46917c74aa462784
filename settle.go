package comm

import (
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/clock"
)

// settleTime is how long Init settles on be: GOCOMM_SETTLE if set, else
// the backend's default (backend.Settler), else nothing. The native
// backend has one only for a rank whose shared-memory waits sleep holding
// their P (transport.Hybrid.SleepsHoldingP): a wait that gives its P back
// restarts the monitor after Init anyway, and settling would not help.
func settleTime(cfg config, be backend.Comm) time.Duration {
	if cfg.settleSet {
		return cfg.settle
	}
	if s, ok := be.(backend.Settler); ok {
		return s.SettleTime()
	}
	return 0
}

// settle keeps the calling goroutine busy on its CPU for d, after one
// system call made through the runtime (wakeMonitor). Init calls it last,
// for GOCOMM_SETTLE or the backend's backend.Settler default.
//
// Why: Go's system monitor (sysmon) sleeps deeply while every P is idle
// or after it has taken a P back from a system call, and then polls at
// its shortest interval, slowing down only after many polls in which it
// found nothing to do. Each poll wakes a thread on the CPU the rank runs
// on. A rank leaving Init has just waited for its peers, so its first
// operations would run through those polls and stall; spent here, the
// polls cost d once. It trades d of Init's time for the first
// operations' latency (docs/tuning.md, GOCOMM_SETTLE).
func settle(d time.Duration) {
	if d <= 0 {
		return
	}
	wakeMonitor()
	end := clock.Nanos() + int64(d)
	for clock.Nanos() < end {
	}
}
