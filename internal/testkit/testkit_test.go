package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const roleVar = "TESTKIT_TEST_ROLE"

func TestMain(m *testing.M) { Main(m, roleVar, rank) }

// rank is what this binary does when started by RankCommand.
func rank(role string) int {
	switch role {
	case "env":
		fmt.Printf("RANK=%q extra=%q\n", os.Getenv("RANK"), os.Getenv("TESTKIT_EXTRA"))
		return 0
	case "fail":
		return Status("rank 7", errors.New("it broke"))
	}
	return Status("role "+role, fmt.Errorf("unknown role"))
}

func TestRankCommandRunsTheRoleInACleanEnvironment(t *testing.T) {
	t.Setenv("RANK", "3") // a launcher's variable the child must not see
	cmd := RankCommand(Context(t, time.Minute), roleVar, "env", "TESTKIT_EXTRA=x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, want := string(out), "RANK=\"\" extra=\"x\"\n"; got != want {
		t.Errorf("child printed %q, want %q (no test output, no RANK, the extra variable)", got, want)
	}
}

func TestStatusFailsTheRankAndSaysWhy(t *testing.T) {
	out, err := RankCommand(Context(t, time.Minute), roleVar, "fail").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("want exit status 1, got %v\n%s", err, out)
	}
	if got, want := string(out), "rank 7: it broke\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if Status("x", nil) != 0 {
		t.Error("Status(nil) is not 0")
	}
}

func TestLauncherFreeEnv(t *testing.T) {
	t.Setenv("WORLD_SIZE", "4")
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("TESTKIT_KEEP", "yes")
	env := LauncherFreeEnv("A=1")
	for _, kv := range env {
		if strings.HasPrefix(kv, "WORLD_SIZE=") || strings.HasPrefix(kv, "OMPI_") {
			t.Errorf("kept %s", kv)
		}
	}
	if !slices.Contains(env, "TESTKIT_KEEP=yes") || env[len(env)-1] != "A=1" {
		t.Errorf("want other variables kept and A=1 last, got %q", env)
	}
}

func TestLockedBufferConcurrentWriters(t *testing.T) {
	var b LockedBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); len(got) != 1600 || strings.Count(got, "ab") != 800 {
		t.Errorf("got %d bytes, %d pairs; want 1600, 800", len(got), strings.Count(got, "ab"))
	}
}

func TestContextEnds(t *testing.T) {
	ctx := Context(t, time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context did not end at its deadline")
	}
	var inner context.Context
	t.Run("inner", func(t *testing.T) { inner = Context(t, time.Hour) })
	if inner.Err() == nil {
		t.Error("context outlived its test")
	}
}

// member is a world member that counts its closes.
type member struct{ closed *atomic.Int32 }

func (m *member) Close() error { m.closed.Add(1); return nil }

func TestWorldClosesEveryRankWhenTheTestEnds(t *testing.T) {
	var closed atomic.Int32
	t.Run("world", func(t *testing.T) {
		w := World(t, func() ([]*member, error) {
			return []*member{{&closed}, nil, {&closed}, {&closed}}, nil
		})
		if len(w) != 4 || closed.Load() != 0 {
			t.Fatalf("world of %d, %d closed before the end", len(w), closed.Load())
		}
	})
	if n := closed.Load(); n != 3 {
		t.Errorf("%d ranks closed, want 3 (the nil one skipped)", n)
	}
}

func TestOnEveryRankAndNoErrors(t *testing.T) {
	var started sync.WaitGroup
	started.Add(3)
	errs := OnEveryRank([]string{"a", "b", "c"}, func(r int, s string) error {
		started.Done()
		started.Wait() // all three run at once, or this deadlocks
		if r == 1 {
			return errors.New("rank " + s)
		}
		return nil
	})
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || errs[1].Error() != "rank b" {
		t.Fatalf("errors by rank: %v", errs)
	}
	ft := &fakeT{}
	func() {
		defer func() { recover() }()
		NoErrors(ft, errs)
	}()
	if !ft.failed || len(ft.msgs) != 1 || ft.msgs[0] != "rank 1: rank b" {
		t.Errorf("NoErrors reported %q (failed %v), want one message naming rank 1", ft.msgs, ft.failed)
	}
}

// fakeT records what NoErrors reports.
type fakeT struct {
	testing.TB
	failed bool
	msgs   []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, a ...any) {
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, a...))
}
func (f *fakeT) Failed() bool { return f.failed }
func (f *fakeT) FailNow()     { panic("FailNow") }

func TestFreePortCanBeListenedOn(t *testing.T) {
	p := FreePort(t)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("port %d: %v", p, err)
	}
	l.Close()
}
