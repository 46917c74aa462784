package transport

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestSHMAloneInProcess: the ranks of a world in one process know they
// share it (their sleeps must let each other run); TestSHMProcesses checks
// that ranks in processes of their own know they do not.
func TestSHMAloneInProcess(t *testing.T) {
	for _, e := range shmWorld(t, 3) {
		if e.shm.alone {
			t.Errorf("rank %d of a world in one process says it is alone in it", e.Rank())
		}
	}
}

// TestSleepOnHeld: a sleep that keeps its P ends as the other kind does:
// on a wake, on a closed channel, at its deadline; and with one P the
// process's other goroutines still run while it sleeps (between its
// slices), so one of them can wake it.
func TestSleepOnHeld(t *testing.T) {
	requireSHM(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, held := range []bool{false, true} {
		var word uint32
		start := time.Now()
		go func() {
			time.Sleep(20 * time.Millisecond)
			atomic.AddUint32(&word, 1)
			futexWake(&word)
		}()
		sleepOn(&word, 0, 5*time.Second, held, nil, nil, nil)
		if el := time.Since(start); atomic.LoadUint32(&word) == 0 || el > 2*time.Second {
			t.Errorf("held %v: woken by a goroutine of this process after %v (word %d)", held, el, atomic.LoadUint32(&word))
		}

		closed := make(chan struct{})
		start = time.Now()
		go func() {
			time.Sleep(20 * time.Millisecond)
			close(closed)
		}()
		sleepOn(&word, word, 5*time.Second, held, nil, closed, nil)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("held %v: a closed channel ended the sleep after %v", held, el)
		}

		start = time.Now()
		sleepOn(&word, word, 30*time.Millisecond, held, nil, nil, nil)
		if el := time.Since(start); el < 30*time.Millisecond || el > 2*time.Second {
			t.Errorf("held %v: a 30 ms sleep took %v", held, el)
		}
	}
}
