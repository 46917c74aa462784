//go:build unix

package main

import (
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

	"github.com/gocomm/comm/internal/testkit"
)

// These tests kill a rank with SIGKILL and interrupt commrun with SIGINT:
// signals that Windows cannot deliver (launch/proc_other.go).

// kill -9 of one rank: every other rank stops and commrun exits non-zero
// within 10 s, naming the rank.
// The survivors are stopped by commrun's SIGTERM or by their own
// ErrPeerLost, whichever comes first.
func TestCommrunKill9(t *testing.T) {
	kill9(t, false)
}

// The same with ranks that ignore commrun's SIGTERM: each survivor learns
// of the dead peer through the library (ErrPeerLost) and exits by itself.
func TestCommrunKill9SurvivorsFailOnTheirOwn(t *testing.T) {
	out := kill9(t, true)
	for _, r := range []int{0, 1, 3} {
		if want := fmt.Sprintf("[%d] all-reduce failed: ", r); !strings.Contains(out, want) {
			t.Errorf("rank %d did not report the failure itself:\n%s", r, out)
		}
	}
	if !strings.Contains(out, "rank 2") {
		t.Errorf("no survivor names rank 2:\n%s", out)
	}
}

// kill9 runs 4 ranks under commrun, kills rank 2 with SIGKILL and checks
// that commrun exits non-zero within 10 s naming it, leaving no rank alive.
func kill9(t *testing.T, ignoreTerm bool) string {
	bin := buildCommrun(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out testkit.LockedBuffer
	cmd := exec.CommandContext(ctx, bin, "-n", "4", "--timeout", "50s", "--kill-grace", "20s", "--", os.Args[0], "-test.run=^$")
	cmd.Env = testkit.LauncherFreeEnv(roleEnv+"=allreduce-loop", "COMMRUN_TEST_DIR="+dir)
	if ignoreTerm {
		cmd.Env = append(cmd.Env, "COMMRUN_TEST_IGNORE_TERM=1")
	}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	pids := make([]int, 4)
	for r := range pids {
		for pids[r] == 0 {
			b, err := os.ReadFile(filepath.Join(dir, "rank"+strconv.Itoa(r)+".pid"))
			if err == nil {
				pids[r], _ = strconv.Atoi(string(b))
				continue
			}
			select {
			case err := <-done:
				t.Fatalf("commrun ended before every rank started: %v\n%s", err, out.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // let them all-reduce a while
	killed := time.Now()
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("commrun still running 30 s after kill -9 of rank 2:\n%s", out.String())
	}
	took := time.Since(killed)
	t.Logf("commrun exited %v after kill -9 of rank 2", took)
	if took > 10*time.Second {
		t.Errorf("took %v, want < 10 s", took)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("commrun: %v, want a non-zero exit status", err)
	}
	// Rank 2 is normally reported first (exit status 137); on a loaded
	// machine a survivor's own "peer lost" exit can be reaped first, and
	// rank 2 is then named in the list that follows.
	msg := out.String()
	if !strings.Contains(msg, "commrun: rank 2 failed first") && !strings.Contains(msg, "commrun: rank 2: killed by signal 9") {
		t.Errorf("summary does not name rank 2 as killed by signal 9:\n%s", msg)
	}
	if !strings.Contains(msg, "killed by signal 9 (killed)") {
		t.Errorf("summary lacks the signal:\n%s", msg)
	}
	for r, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("rank %d (pid %d) still exists after commrun exited: %v", r, pid, err)
		}
	}
	return msg
}

// SIGINT to commrun reaches every rank once (they are in their own process
// groups, so only the forwarded copy arrives).
func TestCommrunForwardsSIGINT(t *testing.T) {
	bin := buildCommrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out testkit.LockedBuffer
	cmd := exec.CommandContext(ctx, bin, "-n", "2", "--", os.Args[0], "-test.run=^$")
	cmd.Env = testkit.LauncherFreeEnv(roleEnv + "=interrupt")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); strings.Count(out.String(), "ready") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("ranks not ready:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Errorf("commrun: %v, want exit status 130", err)
	}
	for r := range 2 {
		if want := fmt.Sprintf("[%d] got SIGINT", r); !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
