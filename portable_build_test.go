//go:build gocomm_portable

package comm_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/conformance"
	"github.com/gocomm/comm/rendezvous"
)

// TestPortableBuild runs the conformance quick suite on what a build
// without Linux's speedups has, as on macOS, Windows and FreeBSD: TCP read
// with plain blocking reads, the hybrid transport reaching every peer over
// TCP (two simulated hosts, no shared memory inside either), and the Go
// loop kernels. First it checks that this is that build: asking for
// shared memory fails and says why. TestPortableBuildWithTag runs it under
// -tags gocomm_portable from the default build.
func TestPortableBuild(t *testing.T) {
	if err := initSHMWorld(2); err == nil || !strings.Contains(err.Error(), "shared-memory transport") {
		t.Fatalf("Init with Transport \"shm\": %v; want the error that this build has no shared memory", err)
	}
	for _, f := range factories() {
		if f.name == "shm" {
			continue // checked above: not in this build
		}
		for n := 1; n <= 5; n++ {
			t.Run(fmt.Sprintf("%s/size=%d", f.name, n), func(t *testing.T) {
				t.Parallel()
				world := f.make(t, n, comm.Algorithms{})
				ctx := context.Background()
				if err := conformance.RunLocal(ctx, world, conformance.QuickCases(), time.Minute); err != nil {
					t.Fatalf("world: %v", err)
				}
				if err := conformance.RunLocal(ctx, splitWorld(t, world), conformance.QuickCases(), time.Minute); err != nil {
					t.Fatalf("groups from Split: %v", err)
				}
			})
		}
	}
}

// initSHMWorld starts n ranks that ask for the shared-memory transport and
// returns the first rank's error, closing whatever did start.
func initSHMWorld(n int) error {
	store := rendezvous.NewMemStore()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := make([]*comm.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() {
			w[i], errs[i] = comm.Init(ctx, comm.Options{Rank: i, Size: n, Store: store,
				Transport: comm.TransportOptions{Kind: comm.TransportSHM, ListenHost: "127.0.0.1"}, Getenv: func(string) string { return "" }})
		})
	}
	wg.Wait()
	closeAll(w)
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
