package ddp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// worlds builds worlds of n ranks over every transport: in-process
// channels, TCP, shared memory, and two simulated hosts (even and odd
// ranks) with shared memory inside each and TCP between them.
var worlds = []struct {
	name string
	make func(t testing.TB, n int) []*comm.Comm
}{
	{"inproc", func(t testing.TB, n int) []*comm.Comm {
		w, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { testkit.CloseAll(w) })
		return w
	}},
	{"tcp", func(t testing.TB, n int) []*comm.Comm {
		return initWorld(t, n, comm.TransportTCP, func(int) string { return "h0" })
	}},
	{"shm", func(t testing.TB, n int) []*comm.Comm {
		return initWorld(t, n, comm.TransportSHM, func(int) string { return "h0" })
	}},
	{"hybrid", func(t testing.TB, n int) []*comm.Comm {
		return initWorld(t, n, comm.TransportAuto, func(r int) string { return fmt.Sprintf("h%d", r%2) })
	}},
}

// initWorld starts n ranks in this process through comm.Init, meeting in
// an in-memory store, with the given transport and host id per rank.
func initWorld(t testing.TB, n int, kind comm.TransportKind, host func(rank int) string) []*comm.Comm {
	t.Helper()
	store := rendezvous.NewMemStore()
	w := make([]*comm.Comm, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() {
			w[i], errs[i] = comm.Init(ctx, comm.Options{
				Rank: i, Size: n, Store: store, Timeout: time.Minute,
				Transport: comm.TransportOptions{Kind: kind, ListenHost: "127.0.0.1", HostID: host(i)},
				Getenv:    func(string) string { return "" },
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			testkit.CloseAll(w)
			if kind == comm.TransportSHM && strings.Contains(err.Error(), "shared-memory transport is not available") {
				t.Skipf("this build has no shared memory (-tags gocomm_portable, or not Linux): %v", err)
			}
			t.Fatalf("rank %d: Init: %v", i, err)
		}
	}
	t.Cleanup(func() { testkit.CloseAll(w) })
	return w
}

// onEveryWorld runs f as a subtest on a world of n ranks of each kind.
func onEveryWorld(t *testing.T, n int, f func(t *testing.T, w []*comm.Comm)) {
	for _, wk := range worlds {
		t.Run(wk.name, func(t *testing.T) { f(t, wk.make(t, n)) })
	}
}

// onEveryRank runs f on every rank of w at once and returns their errors.
func onEveryRank(w []*comm.Comm, f func(rank int, c *comm.Comm) error) []error {
	return testkit.OnEveryRank(w, f)
}
