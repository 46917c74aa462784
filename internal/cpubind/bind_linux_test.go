//go:build linux

package cpubind

import (
	"errors"
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
