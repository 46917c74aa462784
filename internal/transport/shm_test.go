package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/cpubind"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/rendezvous"
)

// requireSHM skips t where this build has no shared-memory transport
// (outside Linux, or built with -tags gocomm_portable): what t tests does
// not exist there, and every peer is reached over TCP instead.
func requireSHM(t testing.TB) {
	t.Helper()
	if !shmSupported {
		t.Skip(errNoSHMHere)
	}
}

// buildSHM is a world of n ranks on one host, every message through
// shared memory (small rings, so that messages wrap and fill them).
func buildSHM(t testing.TB, n int, cfg worldConfig) []Endpoint {
	t.Helper()
	requireSHM(t)
	return buildHybridWorld(t, n, cfg, TransportSHM, func(int) string { return "host0" })
}

// buildHybrid is a world of n ranks on simulated hosts of two ranks each
// (0 and 1, 2 and 3, ...): shared memory inside each, TCP between them.
func buildHybrid(t testing.TB, n int, cfg worldConfig) []Endpoint {
	t.Helper()
	return buildHybridWorld(t, n, cfg, TransportAuto, func(r int) string { return fmt.Sprintf("host%d", r/2) })
}

func buildHybridWorld(t testing.TB, n int, cfg worldConfig, mode TransportMode, host func(int) string) []Endpoint {
	t.Helper()
	ws, err := connectHybridWorld(n, func(o *HybridOptions) {
		o.Prefix = t.Name()
		o.MaxFragment = cfg.maxFragment
		o.Transport = mode
		o.HostID = host(o.Rank)
		if mode == TransportSHM {
			o.SHM.RingBytes = minRingBytes
		}
		if cfg.maxFragment > 0 {
			o.SHM.ChunkBytes = min(cfg.maxFragment, minRingBytes/4)
		}
	})
	return asWorld(t, ws, err)
}

// connectHybridWorld connects n Hybrid endpoints through an in-memory
// store; tweak adjusts each rank's options.
func connectHybridWorld(n int, tweak func(*HybridOptions)) ([]*Hybrid, error) {
	return connectWorld(n, func(ctx context.Context, store *rendezvous.MemStore, r int) (*Hybrid, error) {
		o := HybridOptions{TCPOptions: TCPOptions{Rank: r, Size: n, Secret: []byte("s3cret"), CloseTimeout: time.Second}}
		if tweak != nil {
			tweak(&o)
		}
		return ConnectHybrid(ctx, store, o)
	})
}

// shmWorld is a 2-rank shared-memory world with 64 KiB rings and 16 KiB
// pieces, for white-box tests.
func shmWorld(t testing.TB, n int) []*Hybrid {
	t.Helper()
	return shmWorldWith(t, n, SHMOptions{})
}

// shmSingleWorld is shmWorld with single copy from just above the
// largest send that completes inline (the default when ranks outnumber
// CPUs).
func shmSingleWorld(t testing.TB, n int) []*Hybrid {
	t.Helper()
	return shmWorldWith(t, n, SHMOptions{SingleCopyBytes: minRingBytes/2 + 1})
}

// shmWorldWith is shmWorld with other options beside the ring sizes.
func shmWorldWith(t testing.TB, n int, so SHMOptions) []*Hybrid {
	t.Helper()
	requireSHM(t)
	so.RingBytes, so.ChunkBytes = minRingBytes, 16<<10
	ws, err := connectHybridWorld(n, func(o *HybridOptions) {
		o.Prefix = t.Name()
		o.Transport = TransportSHM
		o.HostID = "host0"
		o.SHM = so
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

// publishPiece writes one record of a message into the ring from e to
// peer by hand: the first piece (with the header) or a later one.
func publishPiece(t *testing.T, e *Hybrid, peer int, h Header, total int, piece []byte, first bool) {
	t.Helper()
	o := e.shm.out[peer]
	o.lock.lock(context.Background(), nil)
	defer o.lock.unlock()
	off, err := e.shm.reserve(tctx(t), o, recordSpan(len(piece)), true)
	if err != nil {
		t.Fatal(err)
	}
	if first {
		putFirstHeader(o.d, off, &h, total, len(piece))
	} else {
		putShortHeader(o.d, off, recMore, len(piece))
	}
	copy(o.d[off+recHeader:], piece)
	o.publish(off, recordSpan(len(piece)))
}

// TestSendsNeverWaitForReceives: two ranks that both send a large message
// and many small ones to each other before either receives must not
// deadlock (the rings fill; the drainers empty them into the unexpected
// queues); the messages then arrive intact.
func TestSendsNeverWaitForReceives(t *testing.T) {
	forEachImpl(t, func(t *testing.T, world func(int, worldConfig) []Endpoint) {
		eps := world(2, worldConfig{})
		ctx := tctx(t)
		big := Header{Comm: 1, Tag: 1, Sig: sig(1)}
		small := Header{Comm: 1, Tag: 2, Sig: sig(2)}
		const nSmall = 3000
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for r := range 2 {
			wg.Go(func() {
				if err := eps[r].Send(ctx, 1-r, big, payload(uint64(r), 5<<20)); err != nil {
					errs <- err
					return
				}
				for i := range nSmall {
					if err := eps[r].Send(ctx, 1-r, small, payload(uint64(r*nSmall+i), 40)); err != nil {
						errs <- err
						return
					}
				}
				buf := make([]byte, 5<<20)
				if _, err := eps[r].Recv(ctx, 1-r, big, buf); err != nil || !bytes.Equal(buf, payload(uint64(1-r), 5<<20)) {
					errs <- fmt.Errorf("rank %d: big message: %v", r, err)
					return
				}
				for i := range nSmall {
					buf := make([]byte, 40)
					if _, err := eps[r].Recv(ctx, 1-r, small, buf); err != nil || !bytes.Equal(buf, payload(uint64((1-r)*nSmall+i), 40)) {
						errs <- fmt.Errorf("rank %d: small message %d: %v", r, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// TestHybridRoutes: hosts found from identities; peers on the same host
// share memory, others use TCP; messages flow both ways.
func TestHybridRoutes(t *testing.T) {
	ws, err := connectHybridWorld(5, func(o *HybridOptions) {
		o.Prefix = t.Name()
		o.HostID = []string{"a", "b", "a", "c", "b"}[o.Rank]
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, e := range ws {
			e.Close()
		}
	}()
	wantHost := []int{0, 1, 0, 2, 1}
	for r, e := range ws {
		for p := range 5 {
			if e.HostOf(p) != wantHost[p] {
				t.Errorf("rank %d: HostOf(%d) = %d, want %d", r, p, e.HostOf(p), wantHost[p])
			}
			if want := shmSupported && p != r && wantHost[p] == wantHost[r]; e.SharedMemory(p) != want {
				t.Errorf("rank %d: SharedMemory(%d) = %v, want %v", r, p, e.SharedMemory(p), want)
			}
		}
		if e.shmError() != nil {
			t.Errorf("rank %d: %v", r, e.shmError())
		}
	}
	ctx := tctx(t)
	var wg sync.WaitGroup
	for r := range 5 {
		wg.Go(func() {
			for p := range 5 {
				if p != r {
					if err := ws[r].Send(ctx, p, Header{Comm: 1, Tag: uint64(r), Sig: sig(0)}, []byte{byte(r)}); err != nil {
						t.Error(err)
					}
				}
			}
			for p := range 5 {
				if p == r {
					continue
				}
				buf := make([]byte, 1)
				if _, err := ws[r].Recv(ctx, p, Header{Comm: 1, Tag: uint64(p), Sig: sig(0)}, buf); err != nil || buf[0] != byte(p) {
					t.Errorf("rank %d from %d: %v %v", r, p, buf, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestSHMSendCancel: a send waiting for room in a ring nobody drains
// returns ctx's error; if none of the message was written the endpoint
// stays usable, and if part was, the endpoint aborts and the peer sees
// the connection lost, as with TCP.
func TestSHMSendCancel(t *testing.T) {
	ws := shmWorldWith(t, 2, SHMOptions{SingleCopyBytes: -1}) // through the ring
	ctx := tctx(t)
	ws[1].shm.role.Store(1) // nobody drains rank 1's rings
	h := Header{Seq: 1, Sig: sig(1)}
	for i := 0; ; i++ {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := ws[0].Send(sctx, 1, h, make([]byte, 16<<10))
		cancel()
		if err == nil {
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || i < 2 {
			t.Fatalf("send %d into a full ring: %v", i, err)
		}
		break
	}
	if err := ws[0].mb.failed(); err != nil {
		t.Fatalf("endpoint failed after a clean cancel: %v", err)
	}
	// Empty the ring, then leave a message half-written.
	ws[1].shm.role.Store(0)
	for {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := ws[1].Recv(rctx, 0, h, make([]byte, 16<<10))
		cancel()
		if err != nil {
			break
		}
	}
	ws[1].shm.role.Store(1)
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := ws[0].Send(sctx, 1, h, make([]byte, 200<<10))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("half-written send: %v", err)
	}
	t.Log(err)
	if err := ws[0].mb.failed(); !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) {
		t.Fatalf("endpoint after a half-written send: %v", err)
	}
	ws[1].shm.role.Store(0)
	_, err = ws[1].Recv(ctx, 0, Header{Seq: 2, Sig: sig(1)}, nil)
	var pe *PeerError
	if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pe) || pe.Peer != 0 {
		t.Fatalf("peer of a half-written send: %v", err)
	}
}

// TestSHMRecvCancelWhileStreaming cancels a receive after the first piece
// of its message was copied into its buffer: Recv returns without waiting
// for the rest, and the message, moved aside, still arrives whole.
func TestSHMRecvCancelWhileStreaming(t *testing.T) {
	ws := shmWorld(t, 2)
	ctx := tctx(t)
	h := Header{Comm: 1, Seq: 1, Sig: sig(2)}
	want := payload(9, 8192)
	cctx, cancel := context.WithCancel(ctx)
	buf := make([]byte, 8192)
	ch := goRecv(cctx, ws[1], 0, h, buf)
	publishPiece(t, ws[0], 1, h, 8192, want[:4096], true)
	mb := ws[1].mb
	waitFor(t, "receive claimed", func() bool { mb.mu.Lock(); defer mb.mu.Unlock(); return len(mb.claimed) == 1 })
	cancel()
	if r := waitResult(t, ch, 5*time.Second); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", r.err)
	}
	if !bytes.Equal(buf[:4096], want[:4096]) {
		t.Fatal("first piece not in the buffer")
	}
	publishPiece(t, ws[0], 1, h, 8192, want[4096:], false)
	buf2 := make([]byte, 8192)
	if _, err := ws[1].Recv(ctx, 0, h, buf2); err != nil || !bytes.Equal(buf2, want) {
		t.Fatalf("message after cancel: %v", err)
	}
}

// TestSHMLateRecvTakesOverMessage: a message that started arriving while
// no receive waited for it (taken in by a receive of another key) is
// handed to a receive posted meanwhile, which gets it whole.
func TestSHMLateRecvTakesOverMessage(t *testing.T) {
	ws := shmWorld(t, 2)
	ctx := tctx(t)
	h := Header{Comm: 1, Seq: 1, Sig: sig(2)}
	other := Header{Comm: 1, Seq: 9, Sig: sig(9)}
	want := payload(3, 8192)
	poller := goRecv(ctx, ws[1], 0, other, make([]byte, 1)) // polls the ring
	publishPiece(t, ws[0], 1, h, 8192, want[:4096], true)
	mb := ws[1].mb
	inflight := func() *inflightMsg {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		if l := mb.inflight[keyOf(&h)]; len(l) == 1 {
			return l[0]
		}
		return nil
	}
	waitFor(t, "message in flight", func() bool { return inflight() != nil })
	buf := make([]byte, 8192)
	ch := goRecv(ctx, ws[1], 0, h, buf)
	waitFor(t, "handoff", func() bool { im := inflight(); return im == nil || im.handoff.Load() })
	publishPiece(t, ws[0], 1, h, 8192, want[4096:], false)
	if r := waitResult(t, ch, 5*time.Second); r.err != nil || !bytes.Equal(buf, want) {
		t.Fatalf("handed-off receive: %v", r.err)
	}
	if err := ws[0].Send(ctx, 1, other, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, poller, 5*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestSHMBadRecord: a record that breaks the ring protocol makes the
// receiver abort naming the sender as lost, as a malformed TCP frame does.
func TestSHMBadRecord(t *testing.T) {
	ws := shmWorld(t, 2)
	ctx := tctx(t)
	o := ws[0].shm.out[1]
	o.lock.lock(ctx, nil)
	off, err := ws[0].shm.reserve(ctx, o, recHeader, true)
	if err != nil {
		t.Fatal(err)
	}
	putShortHeader(o.d, off, 99, 0)
	o.publish(off, recHeader)
	o.lock.unlock()
	_, err = ws[1].Recv(ctx, 0, Header{Sig: sig(1)}, make([]byte, 1))
	var pe *PeerError
	if !errors.Is(err, ErrPeerLost) || !errors.As(err, &pe) || pe.Peer != 0 {
		t.Fatalf("got %v, want rank 0 lost", err)
	}
	t.Log(err)
}

// TestSHMFallback: when a rank of a host cannot map the segment, every
// rank of that host falls back to TCP (and says why), and the world
// works; with Transport SHM the connect fails instead.
func TestSHMFallback(t *testing.T) {
	requireSHM(t)
	tweak := func(mode TransportMode) func(*HybridOptions) {
		return func(o *HybridOptions) {
			o.Prefix = t.Name() + mode.String()
			o.Transport = mode
			o.HostID = "host0"
			o.mapHook = func(rank int) error {
				if rank == 2 {
					return errors.New("injected mapping failure")
				}
				return nil
			}
		}
	}
	ws, err := connectHybridWorld(3, tweak(TransportAuto))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, e := range ws {
			e.Close()
		}
	}()
	for r, e := range ws {
		if e.shmError() == nil || !strings.Contains(e.shmError().Error(), "injected") {
			t.Errorf("rank %d: shmError %v", r, e.shmError())
		}
		for p := range 3 {
			if e.SharedMemory(p) {
				t.Errorf("rank %d: shared memory to %d after fallback", r, p)
			}
		}
	}
	ctx := tctx(t)
	if err := ws[0].Send(ctx, 2, Header{Sig: sig(1)}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := ws[2].Recv(ctx, 0, Header{Sig: sig(1)}, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := connectHybridWorld(3, tweak(TransportSHM)); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Transport SHM with a failing rank: %v", err)
	}
}

// TestSHMSegmentRemoved: the segment file is gone once the world is
// connected, though every rank still uses the memory.
func TestSHMSegmentRemoved(t *testing.T) {
	requireSHM(t)
	dir := t.TempDir()
	ws, err := connectHybridWorld(3, func(o *HybridOptions) {
		o.Prefix = t.Name()
		o.HostID = "host0"
		o.SHM.Dir = dir
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, e := range ws {
			e.Close()
		}
	}()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("files left in the segment directory: %v", left)
	}
	if !ws[0].SharedMemory(1) {
		t.Fatal("no shared memory")
	}
	ctx := tctx(t)
	if err := ws[0].Send(ctx, 1, Header{Sig: sig(1)}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := ws[1].Recv(ctx, 0, Header{Sig: sig(1)}, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestHostIdentity(t *testing.T) {
	id := HostIdentity()
	name, _ := os.Hostname()
	if !strings.HasPrefix(id, name+"/") || id != HostIdentity() {
		t.Fatalf("HostIdentity() = %q", id)
	}
	if runtime.GOOS == "linux" && len(id) < len(name)+30 {
		t.Fatalf("HostIdentity() = %q lacks the boot id", id)
	}
}

func TestParseTransportMode(t *testing.T) {
	for _, m := range []TransportMode{TransportAuto, TransportTCP, TransportSHM} {
		if got, err := ParseTransportMode(m.String()); err != nil || got != m {
			t.Errorf("%v: %v %v", m, got, err)
		}
	}
	if m, err := ParseTransportMode(""); err != nil || m != TransportAuto {
		t.Errorf(`"": %v %v`, m, err)
	}
	if _, err := ParseTransportMode("udp"); err == nil {
		t.Error("udp accepted")
	}
}

func TestSHMOptionsDefaults(t *testing.T) {
	for _, c := range []struct{ n, ring int }{{2, 1 << 20}, {8, 1 << 20}, {16, 1 << 20}, {32, 256 << 10}, {200, 64 << 10}} {
		o, err := SHMOptions{}.withDefaults(c.n)
		if err != nil || o.RingBytes != c.ring || o.ChunkBytes > o.RingBytes/4 {
			t.Errorf("%d ranks: %+v %v", c.n, o, err)
		}
	}
	// Single copy: off while each rank has a CPU of its own.
	cpus := cpubind.HostCPUs()
	if o, _ := (SHMOptions{}).withDefaults(cpus); o.SingleCopyBytes >= 0 {
		t.Errorf("%d ranks on %d CPUs: single copy from %d bytes, want off", cpus, cpus, o.SingleCopyBytes)
	}
	if o, _ := (SHMOptions{}).withDefaults(cpus + 1); o.SingleCopyBytes != min(defaultSingleCopyBytes, o.RingBytes/2+1) {
		t.Errorf("%d ranks on %d CPUs: single copy from %d bytes, want %d", cpus+1, cpus, o.SingleCopyBytes, min(defaultSingleCopyBytes, o.RingBytes/2+1))
	}
	// Spinning on a crowded host: a system call's time for small waits
	// (and at least the backoff's first 64 polls, before any yield), a
	// little between the stage's chunks; an explicit SpinWait holds for
	// both.
	o, _ := (SHMOptions{}).withDefaults(cpus + 1)
	if o.SpinWait != crowdedSpinWait() || o.stageSpin != oversubscribedStageSpin {
		t.Errorf("%d ranks on %d CPUs: spin %v, stage spin %v; want %v, %v", cpus+1, cpus, o.SpinWait, o.stageSpin, crowdedSpinWait(), oversubscribedStageSpin)
	}
	if shmSupported && o.SpinWait <= 0 {
		t.Errorf("%d ranks on %d CPUs: spin %v, want a system call's time (%v measured)", cpus+1, cpus, o.SpinWait, systemCallCost())
	}
	bo := Backoff{spin: o.SpinWait, yield: o.YieldWait}
	for i := 1; shmSupported && i < 64; i++ {
		if p := bo.Next(); p != PhaseSpin {
			t.Fatalf("%d ranks on %d CPUs: poll %d of a wait is phase %v, want a spin before the first yield", cpus+1, cpus, i, p)
		}
	}
	if o, _ := (SHMOptions{}).withDefaults(cpus); o.SpinWait != defaultSpinWait || o.stageSpin != defaultSpinWait {
		t.Errorf("%d ranks on %d CPUs: spin %v, stage spin %v; want %v", cpus, cpus, o.SpinWait, o.stageSpin, defaultSpinWait)
	}
	if o, _ := (SHMOptions{SpinWait: -1}).withDefaults(cpus + 1); o.SpinWait != 0 || o.stageSpin != 0 {
		t.Errorf("SpinWait -1: spin %v, stage spin %v; want none", o.SpinWait, o.stageSpin)
	}
	// Stores: auto follows the host's caches; an explicit choice stays.
	wantAuto := "bypass"
	if cpubind.OneLastLevelCache() {
		wantAuto = "cached"
	}
	for _, c := range []struct{ in, want string }{{"", wantAuto}, {"auto", wantAuto}, {"cached", "cached"}, {"bypass", "bypass"}} {
		if o, err := (SHMOptions{Stores: c.in}).withDefaults(2); err != nil || o.Stores != c.want {
			t.Errorf("Stores %q: %q, %v; want %q", c.in, o.Stores, err, c.want)
		}
	}
	for _, o := range []SHMOptions{{RingBytes: 100 << 10}, {RingBytes: 1 << 10}, {RingBytes: 1 << 20, ChunkBytes: 512 << 10}, {ChunkBytes: -1}, {Stores: "fast"}} {
		if _, err := o.withDefaults(2); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestDrainerIdlesWithoutSystemCall: an idle drainer is parked in the Go
// scheduler, not blocked in a system call. A goroutine blocked in a
// system call keeps its P: a rank runs on one, so its own goroutine
// waited for the runtime's monitor to take the P back, and each take sent
// the monitor back to polling every 20 us, stalling the rank (drainLoop).
func TestDrainerIdlesWithoutSystemCall(t *testing.T) {
	ws := shmWorld(t, 2)
	// Ask both drainers to look, and let them go back to waiting.
	for _, w := range ws {
		w.shm.me.wakeDrainer()
	}
	time.Sleep(50 * time.Millisecond)
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	found := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if !strings.Contains(g, ".drainLoop(") {
			continue
		}
		found++
		if head, _, _ := strings.Cut(g, "\n"); strings.Contains(head, "[syscall") {
			t.Errorf("an idle drainer is in a system call:\n%s", g)
		}
	}
	if found != len(ws) {
		t.Fatalf("found %d drainer goroutines, want %d:\n%s", found, len(ws), stacks)
	}
}

// TestSHMStoresChoosesCopies: attaching a segment sets how the process
// writes for its peers (kernel.CopyShared), and messages arrive intact
// either way.
func TestSHMStoresChoosesCopies(t *testing.T) {
	defer kernel.SetCacheBypass(kernel.CacheBypass())
	for _, stores := range []string{"bypass", "cached"} {
		t.Run(stores, func(t *testing.T) {
			ws := shmWorldWith(t, 2, SHMOptions{Stores: stores})
			if got, want := kernel.CacheBypass(), stores == "bypass"; got != want {
				t.Fatalf("Stores %q: kernel.CacheBypass() = %v", stores, got)
			}
			ctx := tctx(t)
			want := payload(7, 300<<10+5)
			got := make([]byte, len(want))
			h := Header{Comm: 1, Seq: 1, Sig: sig(2)}
			ch := goRecv(ctx, ws[1], 0, h, got)
			if err := ws[0].Send(ctx, 1, h, want); err != nil {
				t.Fatal(err)
			}
			if r := waitResult(t, ch, 10*time.Second); r.err != nil || !bytes.Equal(got, want) {
				t.Fatalf("receive: %v (bytes equal: %v)", r.err, bytes.Equal(got, want))
			}
		})
	}
}
