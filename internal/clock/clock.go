package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// base is the zero of Nanos.
var base = time.Now()

// rate converts counter readings to nanoseconds since base:
// ns + (tsc - tsc0) * perTick. next is the reading at which the rate is
// measured again.
type rate struct {
	tsc0    uint64
	ns      int64
	perTick float64
	next    uint64
}

var (
	current atomic.Pointer[rate]
	mu      sync.Mutex // serialises measuring the rate
	anchor  struct {   // the first pair of readings, guarded by mu
		set bool
		tsc uint64
		ns  int64
	}
	interval = int64(2 * time.Millisecond) // guarded by mu: until the next measurement
)

// Bounds of the interval between measurements of the rate.
const (
	firstInterval = 2 * time.Millisecond
	maxInterval   = time.Second
	// maxReadGap is how many counter ticks (about 30 us at 3 GHz) may
	// separate the readings around a runtime clock read for the two to
	// count as one instant.
	maxReadGap = 100_000
)

// Base is the time at which Nanos was zero.
func Base() time.Time { return base }

// Nanos returns the nanoseconds since Base. It is safe for concurrent use
// and allocates nothing.
func Nanos() int64 {
	if !haveTSC {
		return int64(time.Since(base))
	}
	t := rdtsc()
	if r := current.Load(); r != nil && t < r.next && t >= r.tsc0 {
		return r.ns + int64(float64(t-r.tsc0)*r.perTick)
	}
	return measure(t)
}

// measure returns the runtime clock's reading and, when enough time has
// passed since the first pair of readings, measures the counter's rate
// over all of it and installs it until the interval after this one.
func measure(t uint64) int64 {
	ns := int64(time.Since(base))
	if rdtsc()-t > maxReadGap {
		// Descheduled between the two readings: they are no pair.
		return ns
	}
	if !mu.TryLock() {
		return ns // another goroutine measures
	}
	defer mu.Unlock()
	if !anchor.set || t < anchor.tsc {
		anchor.set, anchor.tsc, anchor.ns = true, t, ns
		current.Store(nil)
		return ns
	}
	if ns-anchor.ns < int64(firstInterval) {
		return ns
	}
	per := float64(ns-anchor.ns) / float64(t-anchor.tsc)
	interval = min(2*interval, int64(maxInterval))
	current.Store(&rate{tsc0: t, ns: ns, perTick: per, next: t + uint64(float64(interval)/per)})
	return ns
}
