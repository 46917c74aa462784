package transport

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// worldConfig tunes a test world.
type worldConfig struct {
	maxFragment int
}

// impl builds a world of n endpoints of one implementation.
type impl struct {
	name  string
	build func(t testing.TB, n int, cfg worldConfig) []Endpoint
}

var impls = []impl{
	{"inproc", buildInproc},
	{"tcp", buildTCP},
	{"shm", buildSHM},       // shm_test.go
	{"hybrid", buildHybrid}, // shm_test.go
}

func buildInproc(t testing.TB, n int, cfg worldConfig) []Endpoint {
	eps := make([]Endpoint, n)
	for i, e := range NewInprocWorld(n, InprocOptions{}) {
		eps[i] = e
	}
	t.Cleanup(func() { closeAll(eps) })
	return eps
}

func buildTCP(t testing.TB, n int, cfg worldConfig) []Endpoint {
	t.Helper()
	tcps, err := connectTCPWorld(n, func(o *TCPOptions) {
		o.Prefix = t.Name()
		o.MaxFragment = cfg.maxFragment
	})
	return asWorld(t, tcps, err)
}

// asWorld hands the endpoints of a connected world to the test: it fails
// the test if connecting failed (err), and when the test ends closes every
// endpoint and checks that no goroutine was left behind.
func asWorld[E Endpoint](t testing.TB, ws []E, err error) []Endpoint {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]Endpoint, len(ws))
	for i, e := range ws {
		eps[i] = e
	}
	t.Cleanup(func() {
		closeAll(eps)
		checkNoLeaks(t)
	})
	return eps
}

// connectTCPWorld connects n TCP endpoints over 127.0.0.1 through an
// in-memory store; tweak adjusts each rank's options.
func connectTCPWorld(n int, tweak func(*TCPOptions)) ([]*TCP, error) {
	return connectWorld(n, func(ctx context.Context, store *rendezvous.MemStore, r int) (*TCP, error) {
		o := TCPOptions{Rank: r, Size: n, Secret: []byte("s3cret"), CloseTimeout: time.Second}
		if tweak != nil {
			tweak(&o)
		}
		return ConnectTCP(ctx, store, o)
	})
}

// connectWorld connects the n ranks of a world at once through one
// in-memory store; on any failure it closes the endpoints that connected.
func connectWorld[E Endpoint](n int, connect func(ctx context.Context, store *rendezvous.MemStore, rank int) (E, error)) ([]E, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store := rendezvous.NewMemStore()
	eps := make([]E, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { eps[r], errs[r] = connect(ctx, store, r) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for i, e := range eps {
				if errs[i] == nil {
					e.Close()
				}
			}
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return eps, nil
}

// closeAll closes every endpoint at once.
func closeAll(eps []Endpoint) { testkit.CloseAll(eps) }

// forEachImpl runs f as a subtest for every implementation.
func forEachImpl(t *testing.T, f func(t *testing.T, world func(n int, cfg worldConfig) []Endpoint)) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			f(t, func(n int, cfg worldConfig) []Endpoint { return im.build(t, n, cfg) })
		})
	}
}

// checkNoLeaks fails if goroutines of this package outlive their
// endpoints. Tests do not run in parallel, so any such goroutine leaked.
func checkNoLeaks(t testing.TB) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		stacks = transportGoroutines()
		if stacks == "" {
			return
		}
	}
	t.Errorf("goroutines left after Close:\n%s", stacks)
}

func transportGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "transport.(*TCP)") || strings.Contains(g, "transport.(*meshBuilder)") ||
			strings.Contains(g, "transport.(*tcpConn)") || strings.Contains(g, "transport.(*Hybrid)") || strings.Contains(g, "transport.(*shmEndpoint)") ||
			strings.Contains(g, "transport.sleepOn") {
			if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "transportGoroutines") {
				continue
			}
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

// result of an asynchronous Recv.
type recvResult struct {
	from int
	err  error
}

func goRecv(ctx context.Context, e Endpoint, peer int, h Header, buf []byte) <-chan recvResult {
	ch := make(chan recvResult, 1)
	go func() {
		from, err := e.Recv(ctx, peer, h, buf)
		ch <- recvResult{from, err}
	}()
	return ch
}

func waitResult(t testing.TB, ch <-chan recvResult, d time.Duration) recvResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("receive still pending after %v", d)
		return recvResult{}
	}
}

// sinkLog collects what a RecvSink hands its sink and checks that the
// pieces come in order, each at the offset where the last one ended.
type sinkLog struct {
	mu     sync.Mutex
	got    []byte
	pieces int
	err    error
}

func (l *sinkLog) sink(off int, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off != len(l.got) && l.err == nil {
		l.err = fmt.Errorf("piece %d at offset %d, want %d", l.pieces, off, len(l.got))
	}
	l.got = append(l.got, p...)
	l.pieces++
}

func (l *sinkLog) check(t *testing.T, want []byte, buf []byte, minPieces int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatal(l.err)
	}
	if !bytes.Equal(l.got, want) {
		t.Fatalf("the sink got %d bytes that differ from the %d sent", len(l.got), len(want))
	}
	if l.pieces < minPieces {
		t.Fatalf("the sink got the message in %d pieces, want at least %d", l.pieces, minPieces)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatal("RecvSink wrote into buf")
	}
}
