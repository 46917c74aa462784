package comm

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/rendezvous"
)

// The join check runs on every store a world meets through: gocomm's own
// (memory, TCP, file) and torch 1.13's TCPStore server, which hosts the
// store under torchrun. Each differs in a way the check must survive: the
// file store outlives its job, and torch's server does not wake a waiting
// client when a key is set by compare-and-set.

// storeKinds opens, per kind, n clients of one fresh store.
func storeKinds(t *testing.T) map[string]func(n int) []rendezvous.Store {
	t.Helper()
	return map[string]func(n int) []rendezvous.Store{
		"mem": func(n int) []rendezvous.Store {
			st := rendezvous.NewMemStore()
			return repeat(n, func() rendezvous.Store { return st })
		},
		"file": func(n int) []rendezvous.Store {
			path := filepath.Join(t.TempDir(), "store")
			return repeat(n, func() rendezvous.Store {
				st, err := rendezvous.NewFileStore(path)
				if err != nil {
					t.Fatal(err)
				}
				return st
			})
		},
		"torch": func(n int) []rendezvous.Store {
			addr := torchStoreServer(t)
			return repeat(n, func() rendezvous.Store {
				st, err := rendezvous.DialTCPStore(context.Background(), addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			})
		},
	}
}

func repeat(n int, f func() rendezvous.Store) []rendezvous.Store {
	out := make([]rendezvous.Store, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

// torchStoreServer starts torch's TCPStore server (as torchrun's agent
// does) and returns its address; it ends with the test.
func torchStoreServer(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch.distributed").Run(); err != nil {
		t.Skipf("torch is not importable by %s (install python3-torch to run this case): %v", python, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, python, "-c", `
import sys, datetime
import torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
print(s.port, flush=True)
sys.stdin.read()
`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cancel(); cmd.Wait() })
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("torch's store server printed no port: %v", err)
	}
	return "127.0.0.1:" + strings.TrimSpace(port)
}

// joinAll runs the join of every rank, rank r believing in sizes[r], and
// returns each rank's error and how long the slowest took.
func joinAll(t *testing.T, stores []rendezvous.Store, sizes []int, rdzv env.RendezvousKind) ([]error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, len(stores))
	start := time.Now()
	var wg sync.WaitGroup
	for r := range stores {
		wg.Go(func() {
			cfg := config{rank: r, size: sizes[r]}
			cfg.rdzv.Kind = rdzv
			errs[r] = newJoiner(stores[r], &cfg).join(ctx)
		})
	}
	wg.Wait()
	return errs, time.Since(start)
}

// TestJoinOnEveryStore: ranks that agree join on every kind of store, and
// ranks that disagree all fail at once with the same verdict.
func TestJoinOnEveryStore(t *testing.T) {
	for name, open := range storeKinds(t) {
		t.Run(name, func(t *testing.T) {
			errs, took := joinAll(t, open(3), []int{3, 3, 3}, env.RendezvousTCP)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if took > 5*time.Second {
				t.Errorf("agreeing ranks took %v to join", took)
			}

			errs, took = joinAll(t, open(3), []int{3, 4, 3}, env.RendezvousTCP)
			for r, err := range errs {
				if !errors.Is(err, ErrEnvironment) || !strings.Contains(err.Error(), "rank 1 says WORLD_SIZE=4") {
					t.Errorf("rank %d: %v, want the disagreement naming rank 1", r, err)
				}
			}
			if took > 5*time.Second {
				t.Errorf("disagreeing ranks took %v to fail", took)
			}
		})
	}
}

// TestJoinStaleStoreFile: a store file left by an earlier run makes the
// join fail saying so, instead of answering with the old run's records.
func TestJoinStaleStoreFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	open := func(n int) []rendezvous.Store {
		return repeat(n, func() rendezvous.Store {
			st, err := rendezvous.NewFileStore(path)
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	}
	if errs, _ := joinAll(t, open(2), []int{2, 2}, env.RendezvousFile); errs[0] != nil || errs[1] != nil {
		t.Fatalf("first run: %v", errs)
	}
	errs, _ := joinAll(t, open(2), []int{2, 2}, env.RendezvousFile)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "the store file is left from an earlier run") {
			t.Errorf("rank %d of the second run: %v, want the stale store file named", r, err)
		}
	}
}

// selfBootstrapped is a driver that meets without the store, as MPI's.
type selfBootstrapped struct{}

var errOpened = errors.New("the driver was asked to open")

func (selfBootstrapped) OwnBootstrap() bool { return true }
func (selfBootstrapped) Open(context.Context, backend.Config) (backend.Comm, error) {
	return nil, errOpened
}

func init() { backend.Register("test-self-bootstrapped", selfBootstrapped{}) }

// TestInitSkipsJoinForSelfBootstrapped: a backend that brings its own
// bootstrap (MPI) is opened at once; a store given to it (each rank its own,
// as the MPI tests do) is not used for the join check, which would wait
// for ranks it can never see.
func TestInitSkipsJoinForSelfBootstrapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Init(ctx, Options{Rank: 1, Size: 2, Backend: "test-self-bootstrapped",
		Store: rendezvous.NewMemStore(), Getenv: func(string) string { return "" }})
	if !errors.Is(err, errOpened) {
		t.Fatalf("Init = %v, want the driver opened", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Init took %v before opening the driver", took)
	}
}
