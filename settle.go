package comm

import (
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/clock"
)

// settleTime is how long Init settles on be: GOCOMM_SETTLE if set, else
// the backend's default (backend.Settler), else nothing. The native
// backend has one only for a rank whose shared-memory waits sleep holding
// their P (transport.Hybrid.SleepsHoldingP): before they did, a wait that
// reached its sleep gave the P back and restarted the monitor after Init
// anyway, and settling did not help.
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
// or after it has taken a P back from a system call, and then polls every
// 20 us, slowing down only after ~50 polls in which it found nothing to
// do. Each poll wakes a thread on the CPU the rank runs on. A rank leaving
// Init has just waited for its peers, so its first operations would run
// through those polls: on this VM class a wake-up costs the running
// thread ~60 us (a C probe: a thread sleeping 20 us in a loop beside a
// spinning one on the same CPU took 53% of the spinner's time), and a
// 2-rank 8-byte all-reduce on the mpi backend spent 3.1-4.0 of its first
// 4.2-5.0 ms in such stalls. Spent here, the polls cost d once.
func settle(d time.Duration) {
	if d <= 0 {
		return
	}
	wakeMonitor()
	end := clock.Nanos() + int64(d)
	for clock.Nanos() < end {
	}
}
