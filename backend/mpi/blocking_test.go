//go:build mpi && cgo

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend/mpi"
	"github.com/gocomm/comm/conformance"
)

// Small collectives run as one blocking MPI call without a Go allocation
// (the comm package's blocking forms recycle theirs, and the backend
// builds the call on the stack), and a loop of them passes through the Go
// scheduler now and then (see the mpi package's schedulerPace).
func TestBlockingNoAllocs(t *testing.T) {
	out, err := mpirun(t, 2, "blocking-allocs", 3*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 40))
	}
	t.Logf("\n%s", tail(out, 8))
}

// The conformance cases again with every collective nonblocking
// (GOCOMM_MPI_BLOCKING_MAX=none), on 3 ranks: the nonblocking calls the
// large sizes use by default, at every size.
func TestConformanceNonblocking(t *testing.T) {
	out, err := runMPI(t, 3, 10*time.Minute, []string{childEnv + "=conformance-quick", mpi.EnvBlockingMax + "=none"}, os.Args[0], "-test.run=^$")
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 60))
	}
	t.Logf("\n%s", tail(out, 6))
}

// A blocking MPI call cannot be interrupted. Rank 0's all-reduce outlives
// its 1 s context while rank 1 stays away: the watchdog gives it up, which
// aborts the world (rank 1's late all-reduce fails with ErrAborted instead
// of joining), and since MPI never lets rank 0's call return, the
// watchdog ends the job with MPI_Abort after its grace period instead of
// leaving rank 0 hanging.
func TestBlockingStuck(t *testing.T) {
	start := time.Now()
	out, err := mpirun(t, 2, "blocking-stuck", 3*time.Minute)
	if err == nil {
		t.Fatalf("the job ended normally; want MPI_Abort\n%s", tail(out, 40))
	}
	// mpirun exits with MPI_Abort's error code; rank 1 would sleep past
	// the limit without it.
	if !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("mpirun: %v; want exit status 3 from MPI_Abort", err)
	}
	for _, want := range []string{"rank 1: the late all-reduce failed as it should",
		"is still inside MPI_Allreduce", "ending the job with MPI_Abort", mpi.EnvBlockingMax + "=none"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "rank 0 returned") {
		t.Errorf("rank 0's all-reduce returned")
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("the job took %v to end", d)
	}
	if t.Failed() {
		t.Logf("\n%s", tail(out, 40))
	}
}

func childBlockingAllocs(ctx context.Context, c *comm.Comm) error {
	f32 := []float32{1, 2}
	i64 := make([]int64, 8)
	ops := []struct {
		name string
		f    func() error
	}{
		{"AllReduce 8 B", func() error { return comm.AllReduce(ctx, c, f32, f32, comm.Sum) }},
		{"AllReduce Avg 8 B", func() error { return comm.AllReduce(ctx, c, f32, f32, comm.Avg) }},
		{"Broadcast 64 B", func() error { return comm.Broadcast(ctx, c, i64, 0) }},
		{"Reduce 64 B", func() error { return comm.Reduce(ctx, c, i64, i64, comm.Max, 1) }},
		{"Barrier", func() error { return comm.Barrier(ctx, c) }},
	}
	passes := mpi.SchedulerPasses()
	start := time.Now()
	for _, op := range ops {
		var err error
		n := testing.AllocsPerRun(2000, func() {
			if e := op.f(); e != nil && err == nil {
				err = e
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", op.name, err)
		}
		if c.Rank() == 0 {
			fmt.Printf("%s: %v allocations per call\n", op.name, n)
		}
		if n != 0 && !raceMPI {
			return fmt.Errorf("%s: %v allocations per call, want 0", op.name, n)
		}
	}
	// 10,000 collectives in a loop that never blocks in Go: without
	// passes through the scheduler sysmon takes the P from inside MPI.
	passed := mpi.SchedulerPasses() - passes
	if c.Rank() == 0 {
		fmt.Printf("%d passes through the Go scheduler in %v\n", passed, time.Since(start).Round(time.Millisecond))
	}
	if passed == 0 {
		return fmt.Errorf("10,000 blocking collectives in %v and no pass through the Go scheduler", time.Since(start))
	}
	return nil
}

func childBlockingStuck(ctx context.Context, c *comm.Comm) error {
	if c.Rank() == 1 {
		time.Sleep(2 * time.Second)
		err := comm.AllReduce(ctx, c, []int32{1}, make([]int32, 1), comm.Sum)
		if !errors.Is(err, comm.ErrAborted) {
			return fmt.Errorf("rank 1: the late all-reduce: got %v, want the world aborted by rank 0", err)
		}
		fmt.Println("rank 1: the late all-reduce failed as it should:", err)
		time.Sleep(5 * time.Minute) // past the test's limit: MPI_Abort ends it
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := comm.AllReduce(tctx, c, []int32{1}, make([]int32, 1), comm.Sum)
	fmt.Println("rank 0 returned:", err)
	return fmt.Errorf("rank 0's all-reduce returned (%v); want the job aborted", err)
}

// runConformanceQuick is the quick cases on the world.
func runConformanceQuick(ctx context.Context) error {
	return runConformance(ctx, mpi.Name, conformance.QuickCases(), false)
}
