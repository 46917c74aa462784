package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// Multi-process tests re-execute the test binary: TestSHMChild runs one
// rank when GOCOMM_SHM_CHILD names what it does, and the parent test
// starts, watches and (for the fault tests) kills the ranks.
const (
	childVar  = "GOCOMM_SHM_CHILD"
	storeVar  = "GOCOMM_SHM_STORE"
	rankVar   = "GOCOMM_SHM_RANK"
	sizeVar   = "GOCOMM_SHM_SIZE"
	prefixVar = "GOCOMM_SHM_PREFIX"
	modeVar   = "GOCOMM_SHM_MODE"
)

// child is one rank process.
type child struct {
	rank int
	cmd  *exec.Cmd
	out  *testkit.LockedBuffer
	// ready receives once the child printed READY.
	ready chan struct{}
}

// startRanks starts size rank processes doing role, meeting through a
// file store; mode is "shm", "tcp" or "auto".
func startRanks(t testing.TB, role string, size int, mode string) (prefix string, kids []*child) {
	t.Helper()
	prefix, _, kids = startRanksFrom(t, role, 0, size, mode)
	return prefix, kids
}

// startRanksFrom starts ranks first..size-1 as processes; the caller
// joins as the ranks below first through the returned store file.
func startRanksFrom(t testing.TB, role string, first, size int, mode string) (prefix, storePath string, kids []*child) {
	t.Helper()
	if !shmSupported {
		t.Skip("no shared-memory transport on this platform")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	storePath = filepath.Join(t.TempDir(), "store")
	prefix = fmt.Sprintf("shmtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	for r := first; r < size; r++ {
		cmd := exec.Command(exe, "-test.run=^TestSHMChild$", "-test.v=false")
		cmd.Env = append(os.Environ(),
			childVar+"="+role, storeVar+"="+storePath, rankVar+"="+strconv.Itoa(r),
			sizeVar+"="+strconv.Itoa(size), prefixVar+"="+prefix, modeVar+"="+mode)
		k := &child{rank: r, cmd: cmd, out: &testkit.LockedBuffer{}, ready: make(chan struct{})}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = k.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				fmt.Fprintln(k.out, line)
				if line == "READY" {
					close(k.ready)
				}
			}
			io.Copy(io.Discard, stdout)
		}()
		kids = append(kids, k)
	}
	t.Cleanup(func() {
		for _, k := range kids {
			if k.cmd.ProcessState == nil {
				k.cmd.Process.Kill()
				k.cmd.Wait()
			}
		}
	})
	return prefix, storePath, kids
}

// waitReady waits until every child printed READY.
func waitReady(t testing.TB, kids []*child, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for _, k := range kids {
		select {
		case <-k.ready:
		case <-timer.C:
			t.Fatalf("rank %d not ready after %v; output:\n%s", k.rank, d, k.out)
		}
	}
}

// waitExit waits for a child and returns its exit error.
func waitExit(t testing.TB, k *child, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- k.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		k.cmd.Process.Kill()
		<-done
		t.Fatalf("rank %d still running after %v; output:\n%s", k.rank, d, k.out)
		return nil
	}
}

// leftoverSegments lists segment files of the job prefix still in the
// segment directories.
func leftoverSegments(prefix string) []string {
	var found []string
	for _, d := range shmDirs("") {
		m, _ := filepath.Glob(filepath.Join(d, "gocomm-*"))
		for _, f := range m {
			// The name carries a hash of prefix and host, not the prefix.
			if strings.Contains(f, hashHex(prefix + "\x00" + HostIdentity())[:12]) {
				found = append(found, f)
			}
		}
	}
	return found
}

// TestSHMProcesses runs 2 and 4 rank processes on this host exchanging
// messages of every size class through shared memory (host identity
// detected, not given), and checks that no segment file is left.
func TestSHMProcesses(t *testing.T) {
	for _, size := range []int{2, 4} {
		t.Run(fmt.Sprintf("ranks=%d", size), func(t *testing.T) {
			prefix, kids := startRanks(t, "exchange", size, "auto")
			for _, k := range kids {
				if err := waitExit(t, k, 60*time.Second); err != nil {
					t.Errorf("rank %d: %v; output:\n%s", k.rank, err, k.out)
				}
			}
			if left := leftoverSegments(prefix); len(left) > 0 {
				t.Errorf("segment files left behind: %v", left)
			}
		})
	}
}

// TestSHMProcessKilled kills one of three rank processes with SIGKILL
// while rank 0 is receiving a stream of large messages from it through
// shared memory and rank 1 waits for it: both must fail, promptly, with an
// error that says the peer was lost and names it.
func TestSHMProcessKilled(t *testing.T) {
	prefix, kids := startRanks(t, "victim", 3, "shm")
	waitReady(t, kids, 30*time.Second)
	time.Sleep(300 * time.Millisecond) // let the stream run
	start := time.Now()
	if err := kids[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, k := range kids[:2] {
		if err := waitExit(t, k, 20*time.Second); err != nil {
			t.Errorf("rank %d: %v; output:\n%s", k.rank, err, k.out)
		}
		t.Logf("rank %d: %s", k.rank, strings.TrimSpace(k.out.String()))
	}
	t.Logf("survivors exited %v after the kill", time.Since(start))
	waitExit(t, kids[2], 5*time.Second)
	if left := leftoverSegments(prefix); len(left) > 0 {
		t.Errorf("segment files left behind: %v", left)
	}
}

// TestSHMChild is one rank of a multi-process test; it does nothing in a
// normal run.
func TestSHMChild(t *testing.T) {
	role := os.Getenv(childVar)
	if role == "" {
		t.Skip("helper process for the multi-process tests")
	}
	if err := runChild(role); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv(rankVar), err)
		os.Exit(1)
	}
	os.Exit(0)
}

func connectChild(ctx context.Context) (*Hybrid, error) {
	rank, _ := strconv.Atoi(os.Getenv(rankVar))
	size, _ := strconv.Atoi(os.Getenv(sizeVar))
	mode, err := ParseTransportMode(os.Getenv(modeVar))
	if err != nil {
		return nil, err
	}
	store, err := rendezvous.NewFileStore(os.Getenv(storeVar))
	if err != nil {
		return nil, err
	}
	// Single copy on at every rank count: the children check that large
	// messages are copied out of the senders' processes.
	so := benchSHMOptions()
	so.SingleCopyBytes = defaultSingleCopyBytes
	return ConnectHybrid(ctx, store, HybridOptions{
		TCPOptions: TCPOptions{Rank: rank, Size: size, Prefix: os.Getenv(prefixVar), Secret: []byte("s3cret")},
		Transport:  mode,
		SHM:        so,
	})
}

// benchSHMOptions reads GOCOMM_SHM_SPIN and GOCOMM_SHM_YIELD (durations),
// for experiments with the wait policy.
func benchSHMOptions() SHMOptions {
	var o SHMOptions
	o.SpinWait, _ = time.ParseDuration(os.Getenv("GOCOMM_SHM_SPIN"))
	o.YieldWait, _ = time.ParseDuration(os.Getenv("GOCOMM_SHM_YIELD"))
	return o
}

func runChild(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if rank, _ := strconv.Atoi(os.Getenv(rankVar)); role == "exchange" && rank%2 == 1 {
		// Odd ranks run with one P, as GOCOMM_BIND=auto has a rank with a
		// core of its own: their waits sleep holding it.
		runtime.GOMAXPROCS(1)
	}
	e, err := connectChild(ctx)
	if err != nil {
		return err
	}
	defer e.Close()
	switch role {
	case "exchange":
		return childExchange(ctx, e)
	case "victim":
		return childVictim(ctx, e)
	case "bench":
		return childBench(ctx, e)
	}
	return fmt.Errorf("unknown role %q", role)
}

// childExchange: every rank sends every other rank messages of several
// sizes (one posted-first, one unexpected, through the rings' wrap and
// chunking) and checks what it receives, then an AnySource round.
func childExchange(ctx context.Context, e *Hybrid) error {
	for p := range e.Size() {
		if p != e.Rank() && !e.SharedMemory(p) {
			return fmt.Errorf("rank %d is reached over TCP: host identity %q not shared? (%v)", p, HostIdentity(), e.shmError())
		}
	}
	if !e.shm.alone {
		return fmt.Errorf("rank %d is alone in process %d, but its endpoint says another rank shares it", e.Rank(), os.Getpid())
	}
	if got, want := e.SleepsHoldingP(), runtime.GOMAXPROCS(0) == 1; got != want {
		return fmt.Errorf("rank %d with GOMAXPROCS %d: SleepsHoldingP %v, want %v", e.Rank(), runtime.GOMAXPROCS(0), got, want)
	}
	sizes := []int{0, 8, 1000, 64 << 10, 300_001, 3 << 20}
	errs := make(chan error, 2*e.Size())
	var wg sync.WaitGroup
	for p := range e.Size() {
		if p == e.Rank() {
			continue
		}
		wg.Go(func() {
			for i, n := range sizes {
				h := Header{Comm: 1, Seq: uint64(i + 1), Tag: uint64(e.Rank()), Sig: sig(uint64(n))}
				if err := e.Send(ctx, p, h, payload(uint64(e.Rank()*100+p*10+i), n)); err != nil {
					errs <- fmt.Errorf("send %d bytes to %d: %w", n, p, err)
					return
				}
			}
		})
		wg.Go(func() {
			for i, n := range sizes {
				h := Header{Comm: 1, Seq: uint64(i + 1), Tag: uint64(p), Sig: sig(uint64(n))}
				buf := make([]byte, n)
				if _, err := e.Recv(ctx, p, h, buf); err != nil {
					errs <- fmt.Errorf("receive %d bytes from %d: %w", n, p, err)
					return
				}
				if !bytes.Equal(buf, payload(uint64(p*100+e.Rank()*10+i), n)) {
					errs <- fmt.Errorf("%d bytes from %d corrupted", n, p)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	// The large messages were copied straight out of the senders' memory
	// where the kernel allows one process to read another's.
	single := 0
	for _, n := range sizes {
		if n >= e.shm.singleMin {
			single++
		}
	}
	if singleCopyExpected() {
		for _, in := range e.shm.ins {
			if !in.single {
				return fmt.Errorf("rank %d cannot read rank %d's memory (process %d)", e.Rank(), in.peer, in.pid)
			}
		}
		if got, want := e.shm.singleIn.Load(), int64(single*(e.Size()-1)); got != want || want == 0 {
			return fmt.Errorf("rank %d copied %d messages out of its peers' memory, want %d", e.Rank(), got, want)
		}
	}
	// AnySource: every rank sends one message to rank 0.
	h := Header{Comm: 2, Tag: 7, Sig: sig(8)}
	if e.Rank() != 0 {
		return e.Send(ctx, 0, h, binary.LittleEndian.AppendUint64(nil, uint64(e.Rank())))
	}
	seen := map[int]bool{}
	for range e.Size() - 1 {
		buf := make([]byte, 8)
		from, err := e.Recv(ctx, AnySource, h, buf)
		if err != nil {
			return err
		}
		if int(binary.LittleEndian.Uint64(buf)) != from || seen[from] {
			return fmt.Errorf("AnySource: message %d from %d", binary.LittleEndian.Uint64(buf), from)
		}
		seen[from] = true
	}
	return nil
}

// childVictim: rank 2 streams 8 MiB messages to rank 0 until it is
// killed; rank 0 receives them, rank 1 waits for a message from rank 2.
// Ranks 0 and 1 succeed when their receive fails because rank 2 was lost.
func childVictim(ctx context.Context, e *Hybrid) error {
	const n = 8 << 20
	h := Header{Comm: 1, Tag: 1, Sig: sig(n)}
	fmt.Println("READY")
	switch e.Rank() {
	case 2:
		msg := payload(1, n)
		for {
			if err := e.Send(ctx, 0, h, msg); err != nil {
				return err
			}
		}
	case 1:
		_, err := e.Recv(ctx, 2, Header{Comm: 1, Tag: 2, Sig: sig(1)}, make([]byte, 1))
		return checkLost(err)
	}
	buf := make([]byte, n)
	for i := 0; ; i++ {
		if _, err := e.Recv(ctx, 2, h, buf); err != nil {
			fmt.Printf("received %d messages\n", i)
			return checkLost(err)
		}
	}
}

func checkLost(err error) error {
	var pe *PeerError
	if !errors.Is(err, ErrPeerLost) || !errors.Is(err, ErrAborted) || !errors.As(err, &pe) || pe.Peer != 2 {
		return fmt.Errorf("got %v, want an abort naming rank 2 as lost", err)
	}
	fmt.Printf("failed as expected: %v\n", err)
	return nil
}

// Bench protocol between the benchmark (rank 0) and its child (rank 1):
// a control message (tag 0) says what to do next.
const (
	benchPingPong = 1 // count round trips of size bytes
	benchSink     = 2 // receive count messages of size bytes, then acknowledge
	benchQuit     = 3
	benchExchange = 4 // count rounds of recursive-doubling exchanges of size bytes
)

// exchangeRounds runs count rounds of the message pattern of a
// recursive-doubling all-reduce (in round k ranks r and r^2^k swap size
// bytes); the world size must be a power of two. rtt, if not nil, gets
// each round's duration.
func exchangeRounds(ctx context.Context, e *Hybrid, size, count int, rtt []time.Duration) error {
	out, in := make([]byte, size), make([]byte, size)
	for i := range count {
		start := time.Now()
		for mask := 1; mask < e.Size(); mask <<= 1 {
			peer := e.Rank() ^ mask
			h := Header{Comm: 9, Seq: uint64(i + 1), Tag: uint64(mask), Sig: sig(uint64(size))}
			if err := e.Send(ctx, peer, h, out); err != nil {
				return err
			}
			if _, err := e.Recv(ctx, peer, h, in); err != nil {
				return err
			}
		}
		if rtt != nil {
			rtt[i] = time.Since(start)
		}
	}
	return nil
}

func childBench(ctx context.Context, e *Hybrid) error {
	ctl := make([]byte, 24)
	// Buffers live across rounds: first touches of fresh pages would
	// dominate the first (short) rounds of a benchmark.
	sinks := map[int][][]byte{}
	for {
		if _, err := e.Recv(context.Background(), 0, Header{Comm: 9, Sig: sig(24)}, ctl); err != nil {
			return err
		}
		op := binary.LittleEndian.Uint64(ctl)
		size := int(binary.LittleEndian.Uint64(ctl[8:]))
		count := int(binary.LittleEndian.Uint64(ctl[16:]))
		switch op {
		case benchQuit:
			return nil
		case benchPingPong:
			h := Header{Comm: 9, Tag: 1, Sig: sig(uint64(size))}
			buf := make([]byte, size)
			for range count {
				if _, err := e.Recv(context.Background(), 0, h, buf); err != nil {
					return err
				}
				if err := e.Send(context.Background(), 0, h, buf); err != nil {
					return err
				}
			}
		case benchExchange:
			if err := exchangeRounds(ctx, e, size, count, nil); err != nil {
				return err
			}
		case benchSink:
			const depth = 2
			if sinks[size] == nil {
				sinks[size] = [][]byte{touched(size), touched(size)}
			}
			errs := make(chan error, depth)
			for k := range depth {
				go func() {
					buf := sinks[size][k]
					for i := k; i < count; i += depth {
						if _, err := e.Recv(context.Background(), 0, Header{Comm: 9, Tag: uint64(2 + k), Sig: sig(uint64(size))}, buf); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			for range depth {
				if err := <-errs; err != nil {
					return err
				}
			}
			if err := e.Send(context.Background(), 0, Header{Comm: 9, Tag: 9, Sig: sig(1)}, []byte{1}); err != nil {
				return err
			}
		}
	}
}

// touched returns a buffer of n bytes whose pages are all mapped.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// benchPeer is rank 0 of a two-process world whose rank 1 runs childBench.
type benchPeer struct {
	e   *Hybrid
	kid *child
}

func startBenchPeer(b *testing.B, mode string) *benchPeer {
	b.Helper()
	w := startBenchRanks(b, mode, 2)
	return &benchPeer{e: w.e, kid: w.kids[0]}
}

// procWorld is rank 0 of a world whose other ranks run childBench.
type procWorld struct {
	e    *Hybrid
	kids []*child
}

func (w *procWorld) control(b *testing.B, op, size, count int) {
	for r := 1; r < w.e.Size(); r++ {
		(&benchPeer{e: w.e}).controlRank(b, r, op, size, count)
	}
}

func startBenchRanks(b *testing.B, mode string, size int) *procWorld {
	b.Helper()
	prefix, storePath, kids := startRanksFrom(b, "bench", 1, size, mode)
	store, err := rendezvous.NewFileStore(storePath)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := ParseTransportMode(mode)
	if err != nil {
		b.Fatal(err)
	}
	e, err := ConnectHybrid(ctx, store, HybridOptions{
		TCPOptions: TCPOptions{Rank: 0, Size: size, Prefix: prefix, Secret: []byte("s3cret")},
		Transport:  m,
		SHM:        benchSHMOptions(),
	})
	if err != nil {
		b.Fatalf("%v; child output:\n%s", err, kids[0].out)
	}
	w := &procWorld{e: e, kids: kids}
	b.Cleanup(func() {
		w.control(b, benchQuit, 0, 0)
		for _, k := range kids {
			waitExit(b, k, 10*time.Second)
		}
		e.Close()
	})
	return w
}

func (p *benchPeer) control(b *testing.B, op, size, count int) { p.controlRank(b, 1, op, size, count) }

func (p *benchPeer) controlRank(b *testing.B, rank, op, size, count int) {
	ctl := binary.LittleEndian.AppendUint64(nil, uint64(op))
	ctl = binary.LittleEndian.AppendUint64(ctl, uint64(size))
	ctl = binary.LittleEndian.AppendUint64(ctl, uint64(count))
	if err := p.e.Send(context.Background(), rank, Header{Comm: 9, Sig: sig(24)}, ctl); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSHMProcess measures two processes on this host, over shared
// memory and over TCP side by side: the one-way latency of 8 bytes (half
// a ping-pong round trip, hop-us) and the bandwidth of 1 MiB and 64 MiB
// messages streamed with the receives posted ahead (MB/s).
func BenchmarkSHMProcess(b *testing.B) {
	peers := map[string]*benchPeer{}
	modes := []string{"shm", "tcp"}
	for _, m := range modes {
		peers[m] = startBenchPeer(b, m)
	}
	ctx := context.Background()
	for _, m := range modes {
		b.Run(m+"/pingpong-8B", func(b *testing.B) {
			p := peers[m]
			p.control(b, benchPingPong, 8, b.N)
			h := Header{Comm: 9, Tag: 1, Sig: sig(8)}
			buf := make([]byte, 8)
			rtt := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if err := p.e.Send(ctx, 1, h, buf); err != nil {
					b.Fatal(err)
				}
				if _, err := p.e.Recv(ctx, 1, h, buf); err != nil {
					b.Fatal(err)
				}
				rtt[i] = time.Since(start)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2/1000, "hop-us")
			// The median resists the other processes of a shared machine.
			slices.Sort(rtt)
			b.ReportMetric(float64(rtt[len(rtt)/2].Nanoseconds())/2/1000, "p50-hop-us")
		})
	}
	for _, size := range []int{1 << 20, 64 << 20} {
		src := touched(size)
		for _, m := range modes {
			b.Run(fmt.Sprintf("%s/stream-%dMiB", m, size>>20), func(b *testing.B) {
				p := peers[m]
				p.control(b, benchSink, size, b.N)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := range b.N {
					if err := p.e.Send(ctx, 1, Header{Comm: 9, Tag: uint64(2 + i%2), Sig: sig(uint64(size))}, src); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := p.e.Recv(ctx, 1, Header{Comm: 9, Tag: 9, Sig: sig(1)}, make([]byte, 1)); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkSHMProcess4 runs four rank processes on this host (the
// oversubscribed case on a 2-core machine), over shared memory and over
// TCP side by side: the time of one round of recursive-doubling
// exchanges of 8 bytes, the message pattern of a small all-reduce.
func BenchmarkSHMProcess4(b *testing.B) {
	worlds := map[string]*procWorld{}
	modes := []string{"shm", "tcp"}
	for _, m := range modes {
		worlds[m] = startBenchRanks(b, m, 4)
	}
	for _, m := range modes {
		b.Run(m+"/exchange-8B", func(b *testing.B) {
			w := worlds[m]
			w.control(b, benchExchange, 8, b.N)
			rtt := make([]time.Duration, b.N)
			b.ResetTimer()
			if err := exchangeRounds(context.Background(), w.e, 8, b.N, rtt); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "round-us")
			slices.Sort(rtt)
			b.ReportMetric(float64(rtt[len(rtt)/2].Nanoseconds())/1000, "p50-round-us")
		})
	}
}

// singleCopyExpected says whether ranks of one host should be able to
// copy out of each other's memory here: Linux without the Yama security
// module restricting ptrace to descendants.
func singleCopyExpected() bool {
	if !shmSupported {
		return false
	}
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	return err != nil || strings.TrimSpace(string(b)) == "0"
}
