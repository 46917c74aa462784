package release

import (
	"sync"
	"sync/atomic"
	"testing"
)

// A reader that sees a word stored by Store64 sees what was stored before
// it: the message passing the package exists for, between goroutines on
// different CPUs, many times over.
func TestStore64PublishesEarlierStores(t *testing.T) {
	const n = 200000
	var payload, flag [8]uint64 // a word each, in separate cache lines
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := uint64(1); i <= n; i++ {
			for atomic.LoadUint64(&flag[4]) != 2*i-2 {
			}
			atomic.StoreUint64(&payload[4], i)
			Store64(&flag[4], 2*i-1)
		}
	})
	for i := uint64(1); i <= n; i++ {
		for atomic.LoadUint64(&flag[4]) != 2*i-1 {
		}
		if got := atomic.LoadUint64(&payload[4]); got != i {
			t.Fatalf("round %d: the flag was published before the payload (%d)", i, got)
		}
		Store64(&flag[4], 2*i)
	}
	wg.Wait()
}

func TestStore64Stores(t *testing.T) {
	var w uint64
	Store64(&w, 0xdeadbeefcafe)
	if w != 0xdeadbeefcafe {
		t.Fatalf("stored %#x", w)
	}
}
