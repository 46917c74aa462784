//go:build mpi && cgo

package mpi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/backend/mpi"
	"github.com/gocomm/comm/conformance"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// The multi-process tests run this test binary under mpirun, once per
// rank, with GOCOMM_MPI_CHILD naming what each rank does (the helper
// process pattern). MPI is never initialised in the parent test process:
// MPI can be initialised only once per process.

const childEnv = "GOCOMM_MPI_CHILD"

func TestMain(m *testing.M) { testkit.MainErr(m, childEnv, "OMPI_COMM_WORLD_RANK", child) }

// mpirun runs np copies of this test binary as role and returns their
// combined output.
func mpirun(tb testing.TB, np int, role string, limit time.Duration) (string, error) {
	tb.Helper()
	return runMPI(tb, np, limit, []string{childEnv + "=" + role}, os.Args[0], "-test.run=^$")
}

// runMPI runs argv under mpirun -np np with env added and returns the
// combined output. It needs mpirun on PATH; the run ends by itself within
// limit (mpirun and its ranks get SIGTERM, then SIGKILL).
func runMPI(tb testing.TB, np int, limit time.Duration, env []string, argv ...string) (string, error) {
	tb.Helper()
	path, err := exec.LookPath("mpirun")
	if err != nil {
		tb.Skip("mpirun not found: install openmpi-bin")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np),
		// Containers often forbid the cross-memory attach that Open MPI's
		// shared-memory transport uses for large messages.
		"--mca", "btl_vader_single_copy_mechanism", "none"}, argv...)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("mpirun -np %d %v: no result within %v (%v)", np, env, limit, err)
	}
	tb.Logf("mpirun -np %d %v %s: %v in %v", np, env, filepath.Base(argv[0]), err, time.Since(start).Round(time.Millisecond))
	return out.String(), err
}

func TestConformance(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			out, err := mpirun(t, np, "conformance", 10*time.Minute)
			if err != nil {
				t.Fatalf("%v\n%s", err, tail(out, 60))
			}
			t.Logf("\n%s", tail(out, 12))
		})
	}
}

func TestConformanceFunneled(t *testing.T) {
	out, err := mpirun(t, 3, "conformance-funneled", 10*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 60))
	}
	t.Logf("\n%s", tail(out, 6))
}

// driverEnv names the driver the failure and concurrency roles use.
const driverEnv = "GOCOMM_MPI_TEST_DRIVER"

func TestFailures(t *testing.T) {
	// Collectives a context can end: no blocking MPI calls (see
	// TestBlockingStuck for what a context can do to those).
	for _, driver := range []string{mpi.Name, mpi.FunneledName} {
		for _, role := range []string{"abort", "timeout", "close-pending", "monitored-barrier-late", "recv-cancel", "recv-upto", "go-panics"} {
			t.Run(driver+"/"+role, func(t *testing.T) {
				out, err := runMPI(t, 2, 3*time.Minute, []string{childEnv + "=" + role, driverEnv + "=" + driver, mpi.EnvBlockingMax + "=none"}, os.Args[0], "-test.run=^$")
				if err != nil {
					t.Fatalf("%v\n%s", err, tail(out, 40))
				}
			})
		}
	}
}

func TestConcurrent(t *testing.T) {
	for _, driver := range []string{mpi.Name, mpi.FunneledName} {
		t.Run(driver, func(t *testing.T) {
			out, err := runMPI(t, 4, 5*time.Minute, []string{childEnv + "=concurrent", driverEnv + "=" + driver}, os.Args[0], "-test.run=^$")
			if err != nil {
				t.Fatalf("%v\n%s", err, tail(out, 40))
			}
		})
	}
}

func TestWorldInfo(t *testing.T) {
	out, err := runMPI(t, 3, 3*time.Minute, []string{childEnv + "=world-info", "GOCOMM_BACKEND=mpi"}, os.Args[0], "-test.run=^$")
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 40))
	}
}

func TestBootstrapNative(t *testing.T) {
	out, err := mpirun(t, 3, "bootstrap", 3*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 40))
	}
}

// Under mpirun on "several hosts" (each rank told it is alone on its
// host) with no MASTER_ADDR, comm.Init meets through MPI by itself and the
// world runs on the native backend.
func TestInitMeetsThroughMPI(t *testing.T) {
	out, err := mpirun(t, 3, "bootstrap-init", 3*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 40))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// ---- the ranks ----

func child(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	switch role {
	case "conformance":
		return runConformance(ctx, mpi.Name, conformance.Cases(conformance.Options{Large: true}), true)
	case "conformance-quick":
		return runConformanceQuick(ctx)
	case "conformance-funneled":
		return runConformance(ctx, mpi.FunneledName, conformance.QuickCases(), false)
	case "bootstrap":
		return childBootstrap(ctx)
	case "bootstrap-init":
		return childBootstrapInit(ctx)
	case "world-info":
		return childWorldInfo(ctx)
	}
	driver := os.Getenv(driverEnv)
	if driver == "" {
		driver = mpi.Name
	}
	c, err := initMPI(ctx, driver, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	switch role {
	case "concurrent":
		return childConcurrent(ctx, c)
	case "abort":
		return childAbort(ctx, c)
	case "timeout":
		return childTimeout(ctx, c)
	case "close-pending":
		return childClosePending(ctx, c)
	case "monitored-barrier-late":
		return childMonitoredBarrierLate(ctx, c)
	case "recv-cancel":
		return childRecvCancel(ctx, c)
	case "recv-upto":
		return childRecvUpTo(ctx, c)
	case "go-panics":
		return childGoPanics(ctx, c)
	case "latency":
		return childLatency(ctx, c)
	case "blocking-allocs":
		return childBlockingAllocs(ctx, c)
	case "blocking-stuck":
		return childBlockingStuck(ctx, c)
	}
	return fmt.Errorf("unknown role %q", role)
}

// initMPI joins the world. Until comm.Init skips the store for backends
// that bring their own bootstrap, a MemStore satisfies its check for
// worlds above one rank (the MPI driver ignores it).
func initMPI(ctx context.Context, backend string, timeout time.Duration) (*comm.Comm, error) {
	return comm.Init(ctx, comm.Options{Backend: backend, Store: rendezvous.NewMemStore(), Timeout: timeout})
}

// runConformance runs the suite on the world, on the groups of a Split
// (two colours, keys reversing the order), and on a NewGroup of every
// other rank in reverse order. With thresholds, the world also runs the
// cases around the cost model's thresholds (non-root buffers nil and full)
// and a fixed-seed random program over three communicators.
func runConformance(ctx context.Context, backend string, cases []conformance.Case, thresholds bool) error {
	c, err := initMPI(ctx, backend, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	run := func(name string, g *comm.Comm, cases []conformance.Case) error {
		start := time.Now()
		for _, cs := range cases {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := cs.Run(cctx, g)
			cancel()
			if err != nil {
				return fmt.Errorf("%s (rank %d of %d): case %s: %w", name, g.Rank(), g.Size(), cs.Name, err)
			}
		}
		if c.Rank() == 0 {
			fmt.Printf("%s: %d cases passed on %d ranks in %v\n", name, len(cases), g.Size(), time.Since(start).Round(time.Millisecond))
		}
		return nil
	}
	if err := run("world", c, cases); err != nil {
		return err
	}
	// The threshold cases move MiBs through every root: one world size
	// (3, odd) is enough to show the MPI backend keeps no root-only state.
	if thresholds && c.Size() == 3 {
		if err := run("world thresholds", c, conformance.ThresholdCases(c.Size())); err != nil {
			return err
		}
		if err := run("world random program", c, []conformance.Case{conformance.RandomProgram(uint64(c.Size())*31+5, 200)}); err != nil {
			return err
		}
	}
	split, err := c.Split(ctx, c.Rank()%2, -c.Rank())
	if err != nil {
		return fmt.Errorf("Split: %w", err)
	}
	if err := run("split", split, conformance.QuickCases()); err != nil {
		return err
	}
	var evens []int
	for r := c.Size() - 1; r >= 0; r-- {
		if r%2 == 0 {
			evens = append(evens, r)
		}
	}
	g, err := c.NewGroup(ctx, evens)
	if err != nil {
		return fmt.Errorf("NewGroup: %w", err)
	}
	if g.IsMember() {
		if err := run("newgroup", g, conformance.QuickCases()); err != nil {
			return err
		}
	}
	// The world still works after its groups.
	if err := comm.Barrier(ctx, c); err != nil {
		return err
	}
	return errors.Join(g.Close(), split.Close())
}

// childAbort: rank 1 aborts; rank 0, waiting in an all-reduce rank 1 never
// joins, fails promptly with ErrAborted naming rank 1.
func childAbort(ctx context.Context, c *comm.Comm) error {
	if c.Rank() == 1 {
		time.Sleep(200 * time.Millisecond)
		c.Abort(errors.New("rank 1 gives up"))
		err := comm.AllReduce(ctx, c, []float32{1}, make([]float32, 1), comm.Sum)
		if !errors.Is(err, comm.ErrAborted) {
			return fmt.Errorf("after Abort: got %v, want ErrAborted", err)
		}
		return nil
	}
	start := time.Now()
	err := comm.AllReduce(ctx, c, []float32{1}, make([]float32, 1), comm.Sum)
	if !errors.Is(err, comm.ErrAborted) || !strings.Contains(err.Error(), "rank 1 gives up") {
		return fmt.Errorf("got %v, want ErrAborted with rank 1's reason", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		return fmt.Errorf("the abort took %v to arrive", d)
	}
	return nil
}

// childTimeout: rank 0's all-reduce times out because rank 1 is not there;
// that aborts the world, so rank 1's all-reduce fails too.
func childTimeout(ctx context.Context, c *comm.Comm) error {
	if c.Rank() == 0 {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := comm.AllReduce(tctx, c, []int32{1}, make([]int32, 1), comm.Sum)
		var opErr *comm.OpError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &opErr) {
			return fmt.Errorf("got %v, want an OpError with DeadlineExceeded", err)
		}
		if err := comm.Barrier(ctx, c); !errors.Is(err, comm.ErrAborted) {
			return fmt.Errorf("after the timeout: got %v, want ErrAborted", err)
		}
		return nil
	}
	time.Sleep(3 * time.Second)
	err := comm.AllReduce(ctx, c, []int32{1}, make([]int32, 1), comm.Sum)
	if !errors.Is(err, comm.ErrAborted) {
		return fmt.Errorf("got %v, want ErrAborted from rank 0's timeout", err)
	}
	return nil
}

// childClosePending: rank 1 closes its world while one of its operations
// is pending; that operation fails with ErrClosed, and rank 0, waiting for
// a message from rank 1, fails with ErrPeerClosed instead of hanging.
// (A rank that closes with nothing pending tells no one: a rank still
// waiting for it then runs into its timeout.)
func childClosePending(ctx context.Context, c *comm.Comm) error {
	if c.Rank() == 1 {
		w := comm.StartBarrier(ctx, c) // rank 0 never joins
		time.Sleep(500 * time.Millisecond)
		if err := c.Close(); err != nil {
			return err
		}
		if err := w.Wait(); !errors.Is(err, comm.ErrClosed) {
			return fmt.Errorf("pending op after Close: got %v, want ErrClosed", err)
		}
		return nil
	}
	start := time.Now()
	_, err := comm.Recv(ctx, c, make([]int64, 4), 1, 3)
	if !errors.Is(err, comm.ErrPeerClosed) {
		return fmt.Errorf("got %v, want ErrPeerClosed", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		return fmt.Errorf("the close took %v to be noticed", d)
	}
	return nil
}

// childMonitoredBarrierLate: rank 1 arrives after rank 0's timeout; both
// get a BarrierError naming rank 1, and the world still works.
func childMonitoredBarrierLate(ctx context.Context, c *comm.Comm) error {
	if c.Rank() == 1 {
		time.Sleep(2 * time.Second)
	}
	err := comm.MonitoredBarrier(ctx, c, 500*time.Millisecond, true)
	var be *comm.BarrierError
	if !errors.As(err, &be) || len(be.Late) != 1 || be.Late[0] != 1 {
		return fmt.Errorf("got %v, want a BarrierError naming rank 1", err)
	}
	if err := comm.MonitoredBarrier(ctx, c, 20*time.Second, false); err != nil {
		return fmt.Errorf("second monitored barrier: %w", err)
	}
	buf := []int32{int32(c.Rank())}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil || buf[0] != 1 {
		return fmt.Errorf("all-reduce after the barriers: %v, %v", buf, err)
	}
	return nil
}

// childRecvCancel: a receive that times out fails alone; a later one gets
// the message.
func childRecvCancel(ctx context.Context, c *comm.Comm) error {
	if c.Rank() == 0 {
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := comm.Recv(tctx, c, make([]int32, 2), 1, 5)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("first Recv: got %v, want DeadlineExceeded", err)
		}
		got := make([]int32, 2)
		if _, err := comm.Recv(ctx, c, got, comm.AnySource, 5); err != nil || got[1] != 42 {
			return fmt.Errorf("second Recv: %v, %v", got, err)
		}
		// A message of the wrong length is ErrLength.
		if _, err := comm.Recv(ctx, c, make([]int32, 3), 1, 6); !errors.Is(err, comm.ErrLength) {
			return fmt.Errorf("short message: got %v, want ErrLength", err)
		}
		if _, err := comm.Recv(ctx, c, make([]int32, 1), 1, 7); !errors.Is(err, comm.ErrLength) {
			return fmt.Errorf("long message: got %v, want ErrLength", err)
		}
		return comm.Barrier(ctx, c)
	}
	time.Sleep(time.Second)
	if err := comm.Send(ctx, c, []int32{41, 42}, 0, 5); err != nil {
		return err
	}
	if err := comm.Send(ctx, c, []int32{1, 2}, 0, 6); err != nil {
		return err
	}
	if err := comm.Send(ctx, c, []int32{1, 2}, 0, 7); err != nil {
		return err
	}
	return comm.Barrier(ctx, c)
}

// childRecvUpTo: RecvUpTo takes messages up to its buffer's length and
// returns their count and sender; a longer one is ErrLength naming both
// lengths and is consumed, so the next message arrives; a receive whose
// ctx ends first fails alone.
func childRecvUpTo(ctx context.Context, c *comm.Comm) error {
	if !c.Supports(comm.CapRecvUpTo) {
		return errors.New("the mpi backend does not report CapRecvUpTo")
	}
	if c.Rank() == 0 {
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _, err := comm.RecvUpTo(tctx, c, make([]int32, 4), 1, 8)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("RecvUpTo before any message: got %v, want DeadlineExceeded", err)
		}
		if err := comm.Barrier(ctx, c); err != nil { // rank 1 sends after it
			return err
		}
		buf := []int32{-1, -1, -1, -1, -1}
		n, from, err := comm.RecvUpTo(ctx, c, buf, comm.AnySource, 8)
		if err != nil || n != 3 || from != 1 || fmt.Sprint(buf) != "[7 8 9 -1 -1]" {
			return fmt.Errorf("3 elements into 5: n %d from %d buf %v, %v", n, from, buf, err)
		}
		if n, _, err := comm.RecvUpTo(ctx, c, buf[:0], 1, 8); err != nil || n != 0 {
			return fmt.Errorf("empty message: n %d, %v", n, err)
		}
		_, _, err = comm.RecvUpTo(ctx, c, buf[:2], 1, 8)
		if !errors.Is(err, comm.ErrLength) || !strings.Contains(err.Error(), "3 elements") || !strings.Contains(err.Error(), "holds 2") {
			return fmt.Errorf("3 elements into 2: got %v, want ErrLength naming 3 and 2", err)
		}
		w := comm.StartRecvUpTo(ctx, c, buf, 1, 8)
		if err := w.Wait(); err != nil || w.Count() != 1 || w.Source() != 1 || buf[0] != 5 {
			return fmt.Errorf("the message after the long one: count %d source %d buf %v, %v", w.Count(), w.Source(), buf, err)
		}
		return comm.Barrier(ctx, c)
	}
	if err := comm.Barrier(ctx, c); err != nil {
		return err
	}
	for _, msg := range [][]int32{{7, 8, 9}, {}, {1, 2, 3}, {5}} {
		if err := comm.Send(ctx, c, msg, 0, 8); err != nil {
			return err
		}
	}
	return comm.Barrier(ctx, c)
}

// childGoPanics: after MPI_Init, a nil dereference is still a Go panic
// (MPI's signal handlers must not replace Go's).
func childGoPanics(ctx context.Context, c *comm.Comm) (err error) {
	func() {
		defer func() {
			if r := recover(); r == nil {
				err = errors.New("no panic")
			}
		}()
		var p *int
		_ = *p
	}()
	if err != nil {
		return err
	}
	return comm.Barrier(ctx, c)
}

// childBootstrap: MPI only tells every rank where rank 0's store will be;
// the world then runs on the native backend.
func childBootstrap(ctx context.Context) error {
	info, err := mpi.Bootstrap(ctx, "127.0.0.1")
	if err != nil {
		return err
	}
	if info.Size != 3 || info.MasterAddr != "127.0.0.1" || info.MasterPort == 0 || info.LocalSize != 3 {
		return fmt.Errorf("bootstrap info %+v", info)
	}
	c, err := comm.Init(ctx, comm.Options{
		Rank: info.Rank, Size: info.Size, LocalRank: info.LocalRank, LocalSize: info.LocalSize,
		MasterAddr: info.MasterAddr, MasterPort: info.MasterPort, Backend: "native",
	})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := []int64{int64(c.Rank())}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	if buf[0] != 3 {
		return fmt.Errorf("sum of ranks = %d, want 3", buf[0])
	}
	return nil
}

// childBootstrapInit: comm.Init finds no meeting place in the environment
// of a several-host MPI job and asks MPI.
func childBootstrapInit(ctx context.Context) error {
	for k, v := range map[string]string{
		"OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
		env.EnvSocketHost: "127.0.0.1", env.EnvBackend: "native",
	} {
		os.Setenv(k, v)
	}
	env, err := comm.ReadEnvironment(os.Getenv)
	if err != nil {
		return err
	}
	if env.Rendezvous.Kind != comm.RendezvousMPI {
		return fmt.Errorf("rendezvous %v (from %s), want %v", env.Rendezvous.Kind, env.Rendezvous.From, comm.RendezvousMPI)
	}
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := []int64{int64(c.Rank())}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	if buf[0] != 3 {
		return fmt.Errorf("sum of ranks = %d, want 3", buf[0])
	}
	return nil
}

// childConcurrent runs, at once from separate goroutines: all-reduces on
// the world, all-reduces and all-gathers on a group of a Split, and a ring
// of sends and receives on the world; every result is checked.
func childConcurrent(ctx context.Context, c *comm.Comm) error {
	g, err := c.Split(ctx, c.Rank()%2, c.Rank())
	if err != nil {
		return err
	}
	defer g.Close()
	const rounds = 300
	errs := make(chan error, 3)
	go func() {
		for i := range rounds {
			buf := []int64{int64(c.Rank() + i), 1}
			if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
				errs <- fmt.Errorf("world round %d: %w", i, err)
				return
			}
			want := int64(c.Size()*(c.Size()-1)/2 + c.Size()*i)
			if buf[0] != want || buf[1] != int64(c.Size()) {
				errs <- fmt.Errorf("world round %d: got %v, want [%d %d]", i, buf, want, c.Size())
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for i := range rounds {
			buf := []float32{float32(g.Rank())}
			if err := comm.AllReduce(ctx, g, buf, buf, comm.Max); err != nil {
				errs <- fmt.Errorf("group round %d: %w", i, err)
				return
			}
			all := make([]uint16, g.Size()*300) // large enough to be pinned, not staged
			mine := make([]uint16, 300)
			for k := range mine {
				mine[k] = uint16(g.Rank()*1000 + k + i)
			}
			if err := comm.AllGather(ctx, g, mine, all); err != nil {
				errs <- fmt.Errorf("group round %d: %w", i, err)
				return
			}
			for r := 0; r < g.Size(); r++ {
				if all[r*300+7] != uint16(r*1000+7+i) {
					errs <- fmt.Errorf("group round %d: block %d = %d", i, r, all[r*300+7])
					return
				}
			}
			if buf[0] != float32(g.Size()-1) {
				errs <- fmt.Errorf("group round %d: max %v", i, buf[0])
				return
			}
		}
		errs <- nil
	}()
	go func() {
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		for i := range rounds {
			w := comm.StartSend(ctx, c, []int32{int32(c.Rank()), int32(i)}, next, 11)
			got := make([]int32, 2)
			if _, err := comm.Recv(ctx, c, got, prev, 11); err != nil {
				errs <- fmt.Errorf("ring round %d: %w", i, err)
				return
			}
			if err := w.Wait(); err != nil {
				errs <- fmt.Errorf("ring round %d: %w", i, err)
				return
			}
			if got[0] != int32(prev) || got[1] != int32(i) {
				errs <- fmt.Errorf("ring round %d: got %v from %d", i, got, prev)
				return
			}
		}
		errs <- nil
	}()
	var all []error
	for range 3 {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// childWorldInfo: the driver's rank, size and local rank come from MPI, a
// configuration that disagrees with MPI is refused, and two worlds live
// side by side.
func childWorldInfo(ctx context.Context) error {
	if !(mpi.Driver{}).OwnBootstrap() {
		return errors.New("OwnBootstrap is false")
	}
	a, err := backend.Open(ctx, mpi.Name, backend.Config{})
	if err != nil {
		return err
	}
	defer a.Close()
	rank, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_RANK"))
	if a.Rank() != rank || a.Size() != 3 {
		return fmt.Errorf("rank %d of %d, want %d of 3", a.Rank(), a.Size(), rank)
	}
	lr, ls := a.(interface{ Local() (int, int) }).Local()
	if lr != rank || ls != 3 {
		return fmt.Errorf("local rank %d of %d, want %d of 3 (one host)", lr, ls, rank)
	}
	if _, err := backend.Open(ctx, mpi.Name, backend.Config{Rank: 0, Size: 7}); err == nil || !strings.Contains(err.Error(), "MPI_COMM_WORLD says") {
		return fmt.Errorf("a configuration of 7 ranks: got %v, want an error", err)
	}
	// A second world beside the first, the way users start one: comm.Init
	// with GOCOMM_BACKEND=mpi and nothing else (on one host the environment
	// reader falls back to a file store, which the MPI driver ignores).
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := []int32{int32(c.Rank())}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil || buf[0] != 3 {
		return fmt.Errorf("all-reduce on the second world: %v, %v", buf, err)
	}
	return nil
}
