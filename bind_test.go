package comm_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/internal/cpubind"
)

// allowedCPUs returns the CPUs the test may run on; binding is Linux only.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("CPU binding is Linux only")
	}
	allowed, err := cpubind.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	return allowed
}

// TestBindAuto starts two ranks with GOCOMM_BIND=auto, as commrun does,
// and checks that every thread of each runs on that rank's own half of
// the CPUs (or, on a machine with one CPU, that nothing was bound).
func TestBindAuto(t *testing.T) {
	allowed := allowedCPUs(t)
	errs, outs := launchRanks(t, 2, "bind-report", time.Minute, "GOCOMM_BIND=auto", "GOMAXPROCS=")
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v\n%s", r, errs[r], outs[r])
		}
		want := cpubind.Block(allowed, r, 2)
		if want == nil {
			want = allowed
		}
		line := fmt.Sprintf("threads on %s\ngomaxprocs %d\n", cpubind.Format(want), len(want))
		if strings.Count(outs[r], "threads on ") != 1 || !strings.Contains(outs[r], line) {
			t.Errorf("rank %d: want every thread on %s and GOMAXPROCS %d, got:\n%s", r, cpubind.Format(want), len(want), outs[r])
		}
	}
}

// TestBindAutoOversubscribed starts three ranks with GOCOMM_BIND=auto on
// two CPUs (the launching thread's affinity, which they inherit): they
// cannot have a CPU each, nor divide evenly among them, so they stay
// unbound and run with GOMAXPROCS 1, their share, where the runtime's
// default would be 2.
func TestBindAutoOversubscribed(t *testing.T) {
	allowed := allowedCPUs(t)
	some := allowed[:min(2, len(allowed))]
	errs, outs := launchBoundTo(t, some, allowed, 3)
	line := fmt.Sprintf("threads on %s\ngomaxprocs 1\n", cpubind.Format(some))
	for r := range 3 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v\n%s", r, errs[r], outs[r])
		}
		if strings.Count(outs[r], "threads on ") != 1 || !strings.Contains(outs[r], line) {
			t.Errorf("rank %d: want every thread on %s and GOMAXPROCS 1, got:\n%s", r, cpubind.Format(some), outs[r])
		}
	}
}

func TestBindInvalid(t *testing.T) {
	getenv := func(k string) string {
		if k == env.EnvBind {
			return "cores"
		}
		return ""
	}
	_, err := comm.Init(t.Context(), comm.Options{Rank: 0, Size: 1, Getenv: getenv})
	if !errors.Is(err, comm.ErrEnvironment) || !strings.Contains(err.Error(), "GOCOMM_BIND") {
		t.Fatalf("Init with GOCOMM_BIND=cores: %v, want an environment error naming GOCOMM_BIND", err)
	}
	t.Log(err)
}

// TestBindAutoOversubscribedEvenly: GOCOMM_BIND=auto with 4 ranks on two
// CPUs binds rank r to the CPUs' r mod 2nd, as mpirun maps ranks by core,
// with GOMAXPROCS 1: two ranks take turns on each CPU, never three.
func TestBindAutoOversubscribedEvenly(t *testing.T) {
	allowed := allowedCPUs(t)
	if len(allowed) < 2 {
		t.Skipf("one CPU (%v): nothing to deal ranks over", allowed)
	}
	some := allowed[:2]
	errs, outs := launchBoundTo(t, some, allowed, 4)
	for r := range 4 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v\n%s", r, errs[r], outs[r])
		}
		line := fmt.Sprintf("threads on %s\ngomaxprocs 1\n", cpubind.Format([]int{some[r%2]}))
		if strings.Count(outs[r], "threads on ") != 1 || !strings.Contains(outs[r], line) {
			t.Errorf("rank %d: want every thread on %d and GOMAXPROCS 1, got:\n%s", r, some[r%2], outs[r])
		}
	}
}

// launchBoundTo launches n ranks reporting their binding under
// GOCOMM_BIND=auto from a thread bound to cpus (children inherit the
// affinity of the thread that starts them), then puts the thread back on
// allowed.
func launchBoundTo(t *testing.T, cpus, allowed []int, n int) ([]error, []string) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cpubind.ApplyThread(cpus); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cpubind.ApplyThread(allowed); err != nil {
			t.Error(err)
		}
	}()
	return launchRanks(t, n, "bind-report", time.Minute, "GOCOMM_BIND=auto", "GOMAXPROCS=")
}
