package shmcoll

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/transport"
	"github.com/gocomm/comm/rendezvous"
)

// testRank is one rank of a test world: its endpoint and its board (nil
// when the endpoint has no collective areas).
type testRank struct {
	*transport.Hybrid
	board *Board
}

func (r *testRank) Board() *Board { return r.board }

// requireSHM skips t where this build has no shared-memory transport
// (outside Linux, or built with -tags gocomm_portable): there is no board
// there.
func requireSHM(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" || portableBuild {
		t.Skip("the shared-memory transport is not available in this build")
	}
}

// ringBytes is the rings' capacity in test worlds: the smallest allowed.
const ringBytes = 64 << 10

// connectHybridWorld connects n Hybrid endpoints, with collective areas,
// through an in-memory store; tweak adjusts each rank's options.
func connectHybridWorld(n int, tweak func(*transport.HybridOptions)) ([]*testRank, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store := rendezvous.NewMemStore()
	ws := make([]*testRank, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			o := transport.HybridOptions{TCPOptions: transport.TCPOptions{Rank: r, Size: n, Secret: []byte("s3cret"), CloseTimeout: time.Second}}
			o.SHM.Areas = Areas
			if tweak != nil {
				tweak(&o)
			}
			e, err := transport.ConnectHybrid(ctx, store, o)
			if err != nil {
				errs[r] = err
				return
			}
			ws[r] = &testRank{Hybrid: e, board: New(e.Areas())}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, w := range ws {
				if w != nil {
					w.Close()
				}
			}
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return ws, nil
}

// shmWorld is an n-rank shared-memory world with 64 KiB rings.
func shmWorld(t testing.TB, n int) []*testRank {
	t.Helper()
	return shmWorldWith(t, n, transport.SHMOptions{})
}

// shmWorldWith is shmWorld with other options beside the ring sizes.
func shmWorldWith(t testing.TB, n int, so transport.SHMOptions) []*testRank {
	t.Helper()
	requireSHM(t)
	so.RingBytes, so.ChunkBytes = ringBytes, 16<<10
	ws, err := connectHybridWorld(n, func(o *transport.HybridOptions) {
		o.Prefix = t.Name()
		o.Transport = transport.TransportSHM
		o.HostID = "host0"
		areas := o.SHM.Areas
		o.SHM = so
		o.SHM.Areas = areas
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, e := range ws {
			wg.Go(func() { e.Close() })
		}
		wg.Wait()
		checkNoLeaks(t)
	})
	return ws
}

// checkNoLeaks fails if goroutines of the transport or of this package
// outlive their endpoints. Tests do not run in parallel, so any such
// goroutine leaked.
func checkNoLeaks(t testing.TB) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if stacks = leakedGoroutines(); stacks == "" {
			return
		}
	}
	t.Errorf("goroutines left after Close:\n%s", stacks)
}

func leakedGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if (strings.Contains(g, "internal/transport.") || strings.Contains(g, "shmcoll.(*Board)")) &&
			!strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "leakedGoroutines") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}

// tctx is a context bounding one test step.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
