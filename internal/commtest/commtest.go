// Package commtest builds worlds of communicators inside one test process,
// over every data path a test may need: in-process channels (NewLocalWorld),
// TCP on loopback, shared memory, and two simulated hosts (even and odd
// ranks) with shared memory inside each and TCP between them. The ranks of
// the Init-made worlds meet through one in-memory store, as the ranks of a
// real job meet through rank 0's.
//
// Data flow: none of its own; it calls comm.Init (or comm.NewLocalWorld)
// once per rank in goroutines and hands the communicators back, closed when
// the test ends.
//
// Who may import it: tests of packages on the public API (and the root's
// external tests). It imports package comm, so nothing below the root can
// use it; internal/testkit is the scaffolding for those.
package commtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// Kinds are the worlds World builds.
var Kinds = []string{"inproc", "tcp", "shm", "hybrid"}

// World returns a world of n ranks of the given kind (one of Kinds) with
// opts (Timeout one minute when unset), closed when t ends. A shared-memory
// world in a build without shared memory skips the test.
func World(t testing.TB, kind string, n int, opts comm.Options) []*comm.Comm {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	one := func(int) string { return "h0" }
	switch kind {
	case "inproc":
		return testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(n, opts) })
	case "tcp":
		opts.Transport.Kind = comm.TransportTCP
		return WorldOn(t, rendezvous.NewMemStore(), n, opts, one)
	case "shm":
		opts.Transport.Kind = comm.TransportSHM
		return WorldOn(t, rendezvous.NewMemStore(), n, opts, one)
	case "hybrid":
		opts.Transport.Kind = comm.TransportAuto
		return WorldOn(t, rendezvous.NewMemStore(), n, opts, func(r int) string { return fmt.Sprintf("h%d", r%2) })
	}
	t.Fatalf("commtest: unknown world kind %q (want one of %v)", kind, Kinds)
	return nil
}

// OnEach runs f as a subtest on a world of n ranks of each kind.
func OnEach(t *testing.T, n int, opts comm.Options, f func(t *testing.T, w []*comm.Comm)) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) { f(t, World(t, kind, n, opts)) })
	}
}

// WorldOn starts n ranks through comm.Init meeting in store, listening on
// 127.0.0.1, rank r with host identity host(r) (nil: the machine's), with
// opts otherwise as given and no environment. The world is closed when t
// ends.
func WorldOn(t testing.TB, store rendezvous.Store, n int, opts comm.Options, host func(rank int) string) []*comm.Comm {
	t.Helper()
	w := make([]*comm.Comm, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := testkit.OnEveryRank(w, func(i int, _ *comm.Comm) (err error) {
		o := opts
		o.Rank, o.Size, o.Store = i, n, store
		o.Transport.ListenHost = "127.0.0.1"
		if host != nil {
			o.Transport.HostID = host(i)
		}
		o.Getenv = func(string) string { return "" }
		w[i], err = comm.Init(ctx, o)
		return err
	})
	if err := errors.Join(errs...); err != nil {
		testkit.CloseAll(w)
		if opts.Transport.Kind == comm.TransportSHM && strings.Contains(err.Error(), "shared-memory transport is not available") {
			t.Skipf("this build has no shared memory (-tags gocomm_portable, or not Linux): %v", err)
		}
		testkit.NoErrors(t, errs) // names the rank
	}
	t.Cleanup(func() { testkit.CloseAll(w) })
	return w
}
