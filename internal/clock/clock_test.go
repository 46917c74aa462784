package clock

import (
	"sync"
	"testing"
	"time"
)

// Nanos stays within the runtime clock's readings around it, once the
// rate is measured and after it has been corrected a few times.
func TestNanosTracksRuntimeClock(t *testing.T) {
	const settled = 20 * time.Millisecond
	Nanos()
	end := time.Now().Add(300 * time.Millisecond)
	checked := 0
	for time.Now().Before(end) {
		a := int64(time.Since(base))
		n := Nanos()
		b := int64(time.Since(base))
		if b-a > int64(50*time.Microsecond) {
			continue // descheduled in between: no bracket
		}
		if a < int64(settled) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		// Each pair of readings the rate is measured from may be up to
		// maxReadGap ticks (tens of microseconds on a loaded VM) apart,
		// which errs the first rates, measured over 2-8 ms, by up to a
		// few percent; from settled on, with the rate measured over
		// tens of milliseconds, allow 100 us plus 10^-3 of the time
		// elapsed. (A CI run saw 68 us at 7.6 ms after base.)
		tol := int64(100*time.Microsecond) + a/1000
		if n < a-tol || n > b+tol {
			t.Fatalf("Nanos = %d outside [%d, %d] (tolerance %d)", n, a, b, tol)
		}
		checked++
		time.Sleep(100 * time.Microsecond)
	}
	if checked < 100 {
		t.Fatalf("only %d bracketed readings", checked)
	}
	if haveTSC && current.Load() == nil {
		t.Error("invariant TSC, but no rate was installed after 300 ms")
	}
}

func TestNanosConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := Nanos()
			for range 100000 {
				n := Nanos()
				// Corrections may step back by the error they remove.
				if n < prev-int64(time.Millisecond) {
					t.Errorf("Nanos went back from %d to %d", prev, n)
					return
				}
				prev = n
			}
		}()
	}
	wg.Wait()
}

func BenchmarkNanos(b *testing.B) {
	Nanos()
	time.Sleep(3 * time.Millisecond)
	for b.Loop() {
		Nanos()
	}
}

func BenchmarkTimeSince(b *testing.B) {
	for b.Loop() {
		_ = time.Since(base)
	}
}
