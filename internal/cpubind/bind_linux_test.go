//go:build linux

package cpubind

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// TestApplyBindsEveryThread binds the test process to one CPU and checks
// that every thread, also one started afterwards, runs on it only; then
// it restores the CPUs.
func TestApplyBindsEveryThread(t *testing.T) {
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Apply(allowed); err != nil {
			t.Errorf("restoring CPUs %v: %v", allowed, err)
		}
	})
	// Many threads: goroutines blocked in locked threads.
	var wg sync.WaitGroup
	release := make(chan struct{})
	locked := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			locked <- struct{}{}
			<-release
		})
	}
	defer func() { close(release); wg.Wait() }()
	for range 8 {
		<-locked // each on a thread of its own
	}
	one := allowed[len(allowed)-1:]
	if err := Apply(one); err != nil {
		t.Fatal(err)
	}
	// A thread started now inherits the binding.
	started := make(chan struct{})
	wg.Go(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		close(started)
		<-release
	})
	<-started
	got, err := ThreadCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 9 {
		t.Fatalf("only %d threads seen", len(got))
	}
	for tid, cpus := range got {
		if !slices.Equal(cpus, one) {
			t.Errorf("thread %d may run on %v, want %v", tid, cpus, one)
		}
	}
}

func TestApplyUnavailableCPU(t *testing.T) {
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	missing := allowed[len(allowed)-1] + 1
	if missing > maxCPU {
		t.Fatalf("every CPU number is allowed: %v", allowed)
	}
	err = Apply([]int{missing})
	if !errors.Is(err, ErrBind) {
		t.Fatalf("Apply([%d]) = %v, want ErrBind", missing, err)
	}
	t.Log(err)
	now, _ := Allowed()
	if !slices.Equal(now, allowed) {
		t.Errorf("a failed Apply changed the CPUs: %v, was %v", now, allowed)
	}
}

// TestHostCPUsWhenBound: a process bound to one CPU at start (as mpirun
// binds each of 2 ranks to a core) sees runtime.NumCPU() == 1, and
// HostCPUs still counts the host's CPUs.
func TestHostCPUsWhenBound(t *testing.T) {
	if os.Getenv("CPUBIND_CHILD") == "1" {
		fmt.Printf("numcpu=%d host=%d\n", runtime.NumCPU(), HostCPUs())
		return
	}
	host := HostCPUs()
	if host < runtime.NumCPU() {
		t.Fatalf("HostCPUs() = %d, fewer than runtime.NumCPU() = %d", host, runtime.NumCPU())
	}
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("this process may run on %d CPU: binding it to one changes nothing", len(allowed))
	}
	// The child inherits the affinity of the thread that starts it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ApplyThread(allowed[:1]); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostCPUsWhenBound$", "-test.v=false")
	cmd.Env = append(os.Environ(), "CPUBIND_CHILD=1")
	out, err := cmd.CombinedOutput()
	if rerr := ApplyThread(allowed); rerr != nil {
		t.Errorf("restoring CPUs %v: %v", allowed, rerr)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var numcpu, got int
	if _, err := fmt.Sscanf(string(out), "numcpu=%d host=%d", &numcpu, &got); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if numcpu != 1 || got != host {
		t.Fatalf("bound child: runtime.NumCPU() = %d, HostCPUs() = %d; want 1 and %d", numcpu, got, host)
	}
}

// TestShareLastLevelCache: the last-level cache is the highest level
// sysfs lists for the first CPU, and every CPU must be in its
// shared_cpu_list; a tree without caches says no.
func TestShareLastLevelCache(t *testing.T) {
	root := t.TempDir()
	cache := func(cpu, index, level int, shared string) {
		d := filepath.Join(root, fmt.Sprintf("cpu%d/cache/index%d", cpu, index))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "level"), []byte(fmt.Sprintln(level)), 0o644)
		os.WriteFile(filepath.Join(d, "shared_cpu_list"), []byte(shared+"\n"), 0o644)
	}
	// CPUs 0-3: private L1 and L2, L3 per pair (two CCXs); CPU 4: none.
	for c := range 4 {
		cache(c, 0, 1, fmt.Sprint(c))
		cache(c, 2, 2, fmt.Sprint(c))
		cache(c, 3, 3, fmt.Sprintf("%d-%d", c&^1, c|1))
	}
	for _, tt := range []struct {
		cpus []int
		want bool
	}{
		{[]int{0, 1}, true},
		{[]int{2, 3}, true},
		{[]int{0, 1, 2, 3}, false},
		{[]int{1, 2}, false},
		{[]int{0}, true},
		{[]int{4}, false},
	} {
		if got := shareLastLevelCache(root, tt.cpus); got != tt.want {
			t.Errorf("CPUs %v share a last-level cache: %v, want %v", tt.cpus, got, tt.want)
		}
	}
}
