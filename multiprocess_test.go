package comm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/conformance"
	"github.com/gocomm/comm/internal/cpubind"
	"github.com/gocomm/comm/internal/testkit"
)

// The multi-process tests re-execute this test binary once per rank with
// GOCOMM_TEST_CHILD naming what the child does, and the launcher's
// environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) as torchrun
// would set it. The children meet through a real TCP store on 127.0.0.1.

const childEnv = "GOCOMM_TEST_CHILD"

func TestMain(m *testing.M) { testkit.MainErr(m, childEnv, "RANK", child) }

func child(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if run, ok := multihostRoles[role]; ok {
		return run(ctx)
	}
	if run, ok := etcdRoles[role]; ok {
		return run(ctx)
	}
	if role == "example-split" {
		return splitRank(ctx)
	}
	c, err := comm.Init(ctx, comm.Options{Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer c.Close()
	switch role {
	case "allreduce-64MiB":
		const n = 16 << 20 // 64 MiB of float32
		buf := make([]float32, n)
		for i := range buf {
			buf[i] = float32(i%1000 + c.Rank())
		}
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			return err
		}
		base := c.Size() * (c.Size() - 1) / 2
		for i, v := range buf {
			if want := float32(c.Size()*(i%1000) + base); v != want {
				return fmt.Errorf("element %d = %v, want %v", i, v, want)
			}
		}
		return nil
	case "bind-report":
		threads, err := cpubind.ThreadCPUs()
		if err != nil {
			return err
		}
		sets := map[string]bool{}
		for _, cpus := range threads {
			sets[cpubind.Format(cpus)] = true
		}
		for s := range sets {
			fmt.Printf("threads on %s\n", s)
		}
		fmt.Printf("gomaxprocs %d\n", runtime.GOMAXPROCS(0))
		return comm.Barrier(ctx, c)
	case "conformance":
		for _, cs := range conformance.QuickCases() {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := cs.Run(cctx, c)
			cancel()
			if err != nil {
				return fmt.Errorf("case %s: %w", cs.Name, err)
			}
		}
		return nil
	case "one-dies":
		buf := []float32{1}
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			return err
		}
		if c.Rank() == 1 {
			os.Exit(3) // crash without closing anything
		}
		start := time.Now()
		for i := 0; ; i++ {
			err := comm.AllReduce(ctx, c, buf, buf, comm.Sum)
			if err == nil {
				if i > 1000 {
					return errors.New("all-reduces keep succeeding without rank 1")
				}
				continue
			}
			if d := time.Since(start); d > 10*time.Second {
				return fmt.Errorf("took %v to fail: %w", d, err)
			}
			if !errors.Is(err, comm.ErrPeerLost) && !errors.Is(err, comm.ErrAborted) {
				return fmt.Errorf("want ErrPeerLost or ErrAborted, got %w", err)
			}
			if !strings.Contains(err.Error(), "rank 1") {
				return fmt.Errorf("error does not name rank 1: %w", err)
			}
			fmt.Printf("rank %d failed as expected: %v\n", c.Rank(), err)
			return nil
		}
	}
	return fmt.Errorf("unknown child role %q", role)
}

// launchRanks runs n ranks of this binary in the given role and returns each
// one's exit error and output.
func launchRanks(t *testing.T, n int, role string, timeout time.Duration, env ...string) ([]error, []string) {
	t.Helper()
	port := testkit.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make([]error, n)
	outs := make([]string, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		cmd := testkit.RankCommand(ctx, childEnv, role,
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
		cmd.Env = append(cmd.Env, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cmd.Wait()
			outs[r] = out.String()
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%s: ranks still running after %v: %q", role, timeout, outs)
	}
	return errs, outs
}

// multiProcessTransports are the data paths the multi-process tests run
// over: TCP on loopback, and the default (shared memory on one host).
var multiProcessTransports = []string{"tcp", "auto"}

func TestMultiProcessAllReduce64MiB(t *testing.T) {
	for _, tr := range multiProcessTransports {
		t.Run(tr, func(t *testing.T) {
			errs, outs := launchRanks(t, 4, "allreduce-64MiB", 3*time.Minute, "GOCOMM_TRANSPORT="+tr)
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v\n%s", r, err, outs[r])
				}
			}
		})
	}
}

func TestMultiProcessConformance(t *testing.T) {
	errs, outs := launchRanks(t, 3, "conformance", 3*time.Minute)
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r])
		}
	}
}

func TestMultiProcessDeadPeer(t *testing.T) {
	for _, tr := range multiProcessTransports {
		t.Run(tr, func(t *testing.T) {
			errs, outs := launchRanks(t, 3, "one-dies", time.Minute, "GOCOMM_TRANSPORT="+tr)
			var exit *exec.ExitError
			if !errors.As(errs[1], &exit) || exit.ExitCode() != 3 {
				t.Errorf("rank 1 should have crashed with status 3: %v\n%s", errs[1], outs[1])
			}
			for _, r := range []int{0, 2} {
				if errs[r] != nil {
					t.Errorf("rank %d: %v\n%s", r, errs[r], outs[r])
				}
			}
		})
	}
}
