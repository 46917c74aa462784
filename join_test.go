package comm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/netns"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// joinRank is one rank process of a join test.
type joinRank struct {
	rank  int
	out   testkit.LockedBuffer
	err   error
	ended time.Time
}

// startJoinRanks starts the given ranks of an n-rank world on 127.0.0.1
// in the "mh-connect-fails" role (Init with zero Options, expected to
// fail; it prints how long Init took and its error), each with the
// torchrun variables plus env(rank). Gocomm's timeouts are unset unless
// env sets them. wait waits for every rank to end.
func startJoinRanks(t *testing.T, n int, ranks []int, env func(rank int) []string) (runs []*joinRank, wait func()) {
	t.Helper()
	port := testkit.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var wg sync.WaitGroup
	for _, r := range ranks {
		run := &joinRank{rank: r}
		runs = append(runs, run)
		vars := []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(n),
			"LOCAL_RANK=" + strconv.Itoa(r), "LOCAL_WORLD_SIZE=" + strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port),
			"GOCOMM_TIMEOUT=", "GOCOMM_INIT_TIMEOUT=", "DEEPSPEED_TIMEOUT=", "GOCOMM_DEBUG="}
		if env != nil {
			vars = append(vars, env(r)...)
		}
		cmd := testkit.RankCommand(ctx, childEnv, "mh-connect-fails", vars...)
		cmd.Stdout, cmd.Stderr = &run.out, &run.out
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Go(func() {
			run.err = cmd.Wait()
			run.ended = time.Now()
		})
	}
	return runs, func() { wg.Wait(); cancel() }
}

var initFailedAfter = regexp.MustCompile(`Init failed after (\S+): `)

// initTook parses how long the rank's Init took to fail.
func initTook(t *testing.T, r *joinRank) time.Duration {
	t.Helper()
	m := initFailedAfter.FindStringSubmatch(r.out.String())
	if m == nil {
		t.Fatalf("rank %d: Init did not fail: %v\n%s", r.rank, r.err, r.out.String())
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestInitWorldSizeMismatch: one rank of four given WORLD_SIZE=5 (a middle
// rank, or rank 0, which hosts the store) makes every rank's Init fail
// within 2 s at the default timeout, with one message that names who said
// what and the likely causes, and no network hint.
func TestInitWorldSizeMismatch(t *testing.T) {
	for _, wrong := range []int{2, 0} {
		t.Run("rank "+strconv.Itoa(wrong), func(t *testing.T) {
			runs, wait := startJoinRanks(t, 4, []int{0, 1, 2, 3}, func(r int) []string {
				if r == wrong {
					return []string{"WORLD_SIZE=5"}
				}
				return nil
			})
			wait()
			var verdict string
			for _, r := range runs {
				out := r.out.String()
				if r.err != nil {
					t.Errorf("rank %d: %v\n%s", r.rank, r.err, out)
					continue
				}
				if took := initTook(t, r); took > 2*time.Second {
					t.Errorf("rank %d failed only after %v", r.rank, took)
				}
				for _, want := range []string{"rank " + strconv.Itoa(wrong) + " says WORLD_SIZE=5", "say WORLD_SIZE=4", "WORLD_SIZE differs", "two jobs share MASTER_ADDR:MASTER_PORT"} {
					if !strings.Contains(out, want) {
						t.Errorf("rank %d's error lacks %q:\n%s", r.rank, want, out)
					}
				}
				for _, bad := range []string{"GOCOMM_SOCKET_IFNAME", "handshake", "never registered"} {
					if strings.Contains(out, bad) {
						t.Errorf("rank %d's error says %q:\n%s", r.rank, bad, out)
					}
				}
				_, v, _ := strings.Cut(out, "disagree about the world: ")
				if verdict == "" {
					verdict = v
				} else if v != verdict {
					t.Errorf("rank %d's verdict differs from another rank's:\n%s\n%s", r.rank, v, verdict)
				}
			}
			t.Logf("rank 1: %s", strings.TrimSpace(runs[1].out.String()))
		})
	}
}

// TestInitRankNeverStarts: with rank 3 of four never started, the others
// say whom they wait for within 10 s (at the default report intervals) and
// their timeout error says rank 3 never registered, without a network
// hint.
func TestInitRankNeverStarts(t *testing.T) {
	const timeout = 12 * time.Second
	start := time.Now()
	runs, wait := startJoinRanks(t, 4, []int{0, 1, 2}, func(int) []string {
		return []string{"GOCOMM_TIMEOUT=" + timeout.String()}
	})
	const progress = "3/4 ranks joined; waiting for rank 3 (not yet registered in the store); giving up in "
	var firstLine time.Duration
	for firstLine == 0 && time.Since(start) < timeout {
		if strings.Contains(runs[0].out.String(), progress) {
			firstLine = time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wait()
	if firstLine == 0 || firstLine > 10*time.Second {
		t.Errorf("rank 0 printed no progress line within 10 s (%v):\n%s", firstLine, runs[0].out.String())
	}
	for _, r := range runs {
		out := r.out.String()
		if r.err != nil {
			t.Errorf("rank %d: %v\n%s", r.rank, r.err, out)
			continue
		}
		initTook(t, r)
		for _, want := range []string{progress, "rank 3 never registered in the tcp store at 127.0.0.1:", "not started, crashed before Init, or given another MASTER_ADDR:MASTER_PORT"} {
			if !strings.Contains(out, want) {
				t.Errorf("rank %d's output lacks %q:\n%s", r.rank, want, out)
			}
		}
		if strings.Contains(out, "GOCOMM_SOCKET_IFNAME") {
			t.Errorf("rank %d's error has a network hint:\n%s", r.rank, out)
		}
	}
	t.Logf("rank 0 (first progress line after %v):\n%s", firstLine.Round(time.Millisecond), strings.TrimSpace(runs[0].out.String()))
}

// TestInitQuietWhenQuick: an Init that finishes within the first few
// seconds prints nothing.
func TestInitQuietWhenQuick(t *testing.T) {
	errs, outs := launchRanks(t, 3, "conformance", time.Minute, "GOCOMM_TRANSPORT=tcp")
	for r := range errs {
		if errs[r] != nil {
			t.Errorf("rank %d: %v\n%s", r, errs[r], outs[r])
		}
		if strings.Contains(outs[r], "ranks joined") {
			t.Errorf("rank %d printed a progress line:\n%s", r, outs[r])
		}
	}
}

// TestMultiHostRegisteredUnreachable: a rank that registered in the store
// but published an address the others cannot reach (an interface only its
// host has) makes the others report, while they wait, that every rank
// registered, and fail with the network hint, never with "never
// registered".
func TestMultiHostRegisteredUnreachable(t *testing.T) {
	const timeout = 8 * time.Second
	nw := netns.ForTest(t, netns.Options{Hosts: 2})
	if err := nw.Hosts()[1].AddDummy("gcu", "10.99.0.2/24"); err != nil {
		t.Fatal(err)
	}
	results := job{t: t, nw: nw, hosts: []int{0, 1, 0}, role: "mh-connect-fails", limit: time.Minute,
		env: func(rank, host, local int) []string {
			env := []string{"GOCOMM_TIMEOUT=" + timeout.String()}
			if rank == 1 {
				env = append(env, "GOCOMM_SOCKET_IFNAME=gcu")
			}
			return env
		}}.run()
	for _, r := range results {
		if r.err != nil {
			t.Errorf("rank %d: %v\n%s", r.rank, r.err, r.out.String())
		}
		if out := r.out.String(); strings.Contains(out, "never registered") {
			t.Errorf("rank %d says a rank never registered:\n%s", r.rank, out)
		}
	}
	out2 := results[2].out.String()
	for _, want := range []string{"3/3 ranks joined; connecting: ranks 0-1 have not finished connecting", "cannot connect to rank 1 at 10.99.0.2:", "GOCOMM_SOCKET_IFNAME"} {
		if !strings.Contains(out2, want) {
			t.Errorf("rank 2's output lacks %q:\n%s", want, out2)
		}
	}
	t.Logf("rank 2: %s", strings.TrimSpace(out2))
}

func init() { multihostRoles["join-report"] = childJoinReport }

// childJoinReport prints how Init ended; a rank whose Init succeeds keeps
// its communicator (and, on rank 0, the store) for a while, so that a rank
// that comes late can still read the store.
func childJoinReport(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		fmt.Printf("Init failed: %v\n", err)
		return nil
	}
	fmt.Println("Init succeeded")
	time.Sleep(3 * time.Second)
	return c.Close()
}

// TestInitExtraRank: a fifth rank (RANK=4, WORLD_SIZE=5) joining a world
// the others say is of four fails at once with the verdict naming it;
// ranks 0-3 either connected before it came, or fail with the same
// verdict.
func TestInitExtraRank(t *testing.T) {
	port := testkit.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs := make([]testkit.LockedBuffer, 5)
	var wg sync.WaitGroup
	for r := range 5 {
		size := 4
		if r == 4 {
			size = 5
		}
		cmd := testkit.RankCommand(ctx, childEnv, "join-report",
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(size),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(size),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"GOCOMM_TIMEOUT=", "GOCOMM_INIT_TIMEOUT=", "DEEPSPEED_TIMEOUT=")
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
			}
		})
	}
	wg.Wait()
	const verdict = "rank 4 says WORLD_SIZE=5, ranks 0-3 say WORLD_SIZE=4"
	if out := outs[4].String(); !strings.Contains(out, verdict) {
		t.Errorf("rank 4's output lacks %q:\n%s", verdict, out)
	}
	for r := range 4 {
		if out := outs[r].String(); !strings.Contains(out, "Init succeeded") && !strings.Contains(out, verdict) {
			t.Errorf("rank %d neither connected nor failed with the verdict:\n%s", r, out)
		}
	}
	t.Logf("rank 4: %s", strings.TrimSpace(outs[4].String()))
}

// TestInitReportsToLogger: with Options.Logger set, the progress lines go
// to it, and the timeout names the rank that never registered.
func TestInitReportsToLogger(t *testing.T) {
	var buf testkit.LockedBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	store := rendezvous.NewMemStore()
	defer store.Close()
	_, err := comm.Init(context.Background(), comm.Options{Rank: 0, Size: 2, Store: store, Logger: logger,
		Timeout: 6 * time.Second, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "rank 1 never registered in the store given in Options.Store") {
		t.Errorf("Init: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Init's error does not wrap context.DeadlineExceeded: %v", err)
	}
	if out := buf.String(); !strings.Contains(out, "level=INFO") || !strings.Contains(out, "1/2 ranks joined; waiting for rank 1 (not yet registered in the store)") {
		t.Errorf("logger got no progress line:\n%s", out)
	}
}
