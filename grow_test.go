package comm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/launch"
	"github.com/gocomm/comm/rendezvous"
)

// joinOpts are a newcomer's Options for a world of tcpWorldOn.
func joinOpts(store rendezvous.Store) comm.Options {
	return comm.Options{Timeout: 20 * time.Second, Store: store,
		Transport: comm.TransportOptions{ListenHost: "127.0.0.1"},
		Getenv:    func(string) string { return "" }}
}

// startJoiners starts n newcomers in goroutines; wait returns them in
// rank order with their errors.
func startJoiners(ctx context.Context, store rendezvous.Store, n int) (wait func() ([]*comm.Comm, []error)) {
	joined := make([]*comm.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { joined[i], errs[i] = comm.Join(ctx, joinOpts(store)) })
	}
	return func() ([]*comm.Comm, []error) {
		wg.Wait()
		slices.SortFunc(joined, func(a, b *comm.Comm) int { return a.Rank() - b.Rank() })
		return joined, errs
	}
}

// awaitJoiners polls Joiners on every rank of w until it reports want.
func awaitJoiners(t *testing.T, ctx context.Context, w []*comm.Comm, want int) {
	t.Helper()
	for {
		counts := make([]int, len(w))
		testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) (err error) {
			counts[r], err = c.Joiners(ctx)
			return err
		}))
		for r, n := range counts {
			if n != counts[0] {
				t.Fatalf("Joiners: rank %d says %d, rank 0 %d", r, n, counts[0])
			}
		}
		if counts[0] == want {
			return
		}
		if counts[0] > want || ctx.Err() != nil {
			t.Fatalf("Joiners = %d, want %d", counts[0], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grow calls Grow on every rank of w and returns the grown world's ranks
// of w, in order.
func grow(t *testing.T, ctx context.Context, w []*comm.Comm) []*comm.Comm {
	t.Helper()
	grown := make([]*comm.Comm, len(w))
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) (err error) {
		grown[r], err = c.Grow(ctx)
		return err
	}))
	t.Cleanup(func() { testkit.CloseAll(grown) })
	return grown
}

// checkWorld checks that w is one world of len(w) ranks on one host whose
// all-reduce works.
func checkWorld(t *testing.T, ctx context.Context, w []*comm.Comm) {
	t.Helper()
	n := len(w)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		if c.Rank() != r || c.Size() != n {
			return fmt.Errorf("rank %d of %d, want %d of %d", c.Rank(), c.Size(), r, n)
		}
		if c.LocalRank() != r || c.LocalSize() != n || c.NodeRank() != 0 {
			return fmt.Errorf("local rank %d of %d on node %d, want %d of %d on node 0", c.LocalRank(), c.LocalSize(), c.NodeRank(), r, n)
		}
		got := make([]int64, 2)
		if err := comm.AllReduce(ctx, c, []int64{int64(r), 1}, got, comm.Sum); err != nil {
			return err
		}
		if want := []int64{int64(n * (n - 1) / 2), int64(n)}; !slices.Equal(got, want) {
			return fmt.Errorf("all-reduce = %v, want %v", got, want)
		}
		return nil
	}))
}

// TestGrow: two newcomers join a world of two, which admits them with
// Grow; the world of four works, and grows again.
func TestGrow(t *testing.T) {
	store := rendezvous.NewMemStore()
	w := tcpWorldOn(t, store, 2, comm.Options{Timeout: 20 * time.Second, DebugAddr: "127.0.0.1:0"})
	ctx := testkit.Context(t, time.Minute)
	awaitJoiners(t, ctx, w, 0)
	wait := startJoiners(ctx, store, 2)
	awaitJoiners(t, ctx, w, 2)
	grown := grow(t, ctx, w)
	joined, errs := wait()
	t.Cleanup(func() { testkit.CloseAll(joined) })
	testkit.NoErrors(t, errs)
	all := append(slices.Clone(grown), joined...)
	checkWorld(t, ctx, all)
	if w[0].FlightRecorder().DebugAddr() != nil || grown[0].FlightRecorder().DebugAddr() == nil {
		t.Error("the debug endpoint did not move to the grown world")
	}
	// The old world is still usable until closed.
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error { return comm.Barrier(ctx, c) }))

	// A newcomer's world grows too: a fifth rank joins.
	wait = startJoiners(ctx, store, 1)
	awaitJoiners(t, ctx, all, 1)
	again := grow(t, ctx, all)
	fifth, errs := wait()
	t.Cleanup(func() { testkit.CloseAll(fifth) })
	testkit.NoErrors(t, errs)
	checkWorld(t, ctx, append(again, fifth...))
}

// TestShrinkThenGrow: a world of four loses two ranks, shrinks to two,
// and grows to five with three newcomers (lose two, gain three); the
// shrunk world's local ranks are its own.
func TestShrinkThenGrow(t *testing.T) {
	store := rendezvous.NewMemStore()
	w := tcpWorldOn(t, store, 4, comm.Options{Timeout: 20 * time.Second})
	ctx := testkit.Context(t, time.Minute)
	w[1].Close()
	w[3].Close()
	survivors := []*comm.Comm{w[0], w[2]}
	shrunk := make([]*comm.Comm, 2)
	testkit.NoErrors(t, testkit.OnEveryRank(survivors, func(i int, c *comm.Comm) (err error) {
		sctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		shrunk[i], err = c.Shrink(sctx)
		return err
	}))
	t.Cleanup(func() { testkit.CloseAll(shrunk) })
	checkWorld(t, ctx, shrunk)

	wait := startJoiners(ctx, store, 3)
	awaitJoiners(t, ctx, shrunk, 3)
	grown := grow(t, ctx, shrunk)
	joined, errs := wait()
	t.Cleanup(func() { testkit.CloseAll(joined) })
	testkit.NoErrors(t, errs)
	checkWorld(t, ctx, append(grown, joined...))
}

// TestJoinNotAdmitted: a newcomer the world never admits gets
// ErrNotAdmitted when its time runs out.
func TestJoinNotAdmitted(t *testing.T) {
	store := rendezvous.NewMemStore()
	tcpWorldOn(t, store, 2, comm.Options{Timeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c, err := comm.Join(ctx, joinOpts(store))
	if !errors.Is(err, comm.ErrNotAdmitted) {
		t.Fatalf("Join = %v, %v; want ErrNotAdmitted", c, err)
	}
}

// TestGrowRefusals: Grow and Join say what is wrong instead of waiting.
func TestGrowRefusals(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	local := testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(2, comm.Options{}) })
	if _, err := local[0].Grow(ctx); err == nil {
		t.Error("Grow on a world without a store succeeded")
	}
	w := tcpWorld(t, 2, comm.Options{Timeout: 20 * time.Second})
	groups := make([]*comm.Comm, 2)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) (err error) {
		groups[r], err = c.Split(ctx, 0, r)
		return err
	}))
	if _, err := groups[0].Grow(ctx); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("Grow on a group = %v, want ErrInvalid", err)
	}
	//lint:ignore SA1012 a nil ctx is the bad input under test
	if _, err := comm.Join(nil, joinOpts(rendezvous.NewMemStore())); err == nil { //nolint:staticcheck
		t.Error("Join with a nil ctx succeeded")
	}
}

func init() {
	multihostRoles["elastic-member"] = elasticMember
	multihostRoles["elastic-joiner"] = elasticJoiner
}

// elasticMember is a rank of TestReplaceFailedRank: rank 2 dies after the
// first all-reduce; the others shrink past it, wait for its replacement
// and grow back to three.
func elasticMember(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	if os.Getenv("GOCOMM_JOIN") == "1" {
		// Restarted by commrun --elastic: Init joined the world.
		return elasticCheck(ctx, c)
	}
	buf := []int64{1}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	if c.Rank() == 2 {
		// Crash as kill -9 does: nothing closed, nothing flushed.
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill()
		}
		select {}
	}
	for comm.AllReduce(ctx, c, buf, buf, comm.Sum) == nil {
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	shrunk, err := c.Shrink(sctx)
	cancel()
	if err != nil {
		return err
	}
	defer shrunk.Close()
	for {
		n, err := shrunk.Joiners(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	grown, err := shrunk.Grow(ctx)
	if err != nil {
		return err
	}
	defer grown.Close()
	return elasticCheck(ctx, grown)
}

// elasticJoiner is the replacement of TestReplaceFailedRank's rank 2.
func elasticJoiner(ctx context.Context) error {
	c, err := comm.Join(ctx, comm.Options{Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	return elasticCheck(ctx, c)
}

// elasticCheck all-reduces on the regrown world of three and says so.
func elasticCheck(ctx context.Context, c *comm.Comm) error {
	got := []int64{int64(c.Rank()), 1}
	if err := comm.AllReduce(ctx, c, got, got, comm.Sum); err != nil {
		return err
	}
	if c.Size() != 3 || got[0] != 3 || got[1] != 3 {
		return fmt.Errorf("rank %d of %d: all-reduce = %v, want [3 3] on 3 ranks", c.Rank(), c.Size(), got)
	}
	fmt.Printf("rank %d of %d after regrowing\n", c.Rank(), c.Size())
	return nil
}

// TestReplaceFailedRank: real processes on loopback meeting through rank
// 0's TCP store (MASTER_ADDR, MASTER_PORT): rank 2 of 3 crashes, the
// survivors shrink, a replacement process started with the same
// environment joins, and the world is three again.
func TestReplaceFailedRank(t *testing.T) {
	port := testkit.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vars := func(r int) []string {
		return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=3", "LOCAL_RANK=" + strconv.Itoa(r), "LOCAL_WORLD_SIZE=3",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port), "GOCOMM_TRANSPORT=tcp"}
	}
	type proc struct {
		out  testkit.LockedBuffer
		err  error
		done chan struct{}
	}
	start := func(role string, r int) *proc {
		p := &proc{done: make(chan struct{})}
		cmd := testkit.RankCommand(ctx, childEnv, role, vars(r)...)
		cmd.Stdout, cmd.Stderr = &p.out, &p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.err = cmd.Wait(); close(p.done) }()
		return p
	}
	var ranks []*proc
	for r := range 3 {
		ranks = append(ranks, start("elastic-member", r))
	}
	<-ranks[2].done
	// The replacement, as a launcher would start it: rank 2's environment.
	ranks[2] = start("elastic-joiner", 2)
	for r, p := range ranks {
		<-p.done
		if p.err != nil || !strings.Contains(p.out.String(), "of 3 after regrowing") {
			t.Errorf("rank %d: %v\n%s", r, p.err, p.out.String())
		}
	}
	if t.Failed() {
		return
	}
	if out := ranks[2].out.String(); !strings.Contains(out, "rank 2 of 3") {
		t.Errorf("the replacement is not rank 2: %s", out)
	}
}

// TestCommrunElastic: commrun --elastic 2:3 (launch.Run with Elastic) runs
// three ranks; rank 2 is killed by SIGKILL after the first all-reduce; the
// launcher restarts it with GOCOMM_JOIN=1, the survivors shrink and grow,
// and the restarted process's Init joins: the job ends with three ranks
// and succeeds.
func TestCommrunElastic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out testkit.LockedBuffer
	err := launch.Run(ctx, launch.Config{
		NProcs: 3, Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env:     testkit.LauncherFreeEnv(childEnv+"=elastic-member", "GOCOMM_TRANSPORT=tcp"),
		Elastic: &launch.Elastic{Min: 2, Max: 3, MaxRestarts: 1},
		Stdout:  &out, Stderr: &out, Bind: "none",
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"rank 2 failed (killed by signal 9", "restarting it (1 of 1 restarts)",
		"[0] rank 0 of 3 after regrowing", "[1] rank 1 of 3 after regrowing", "[2] rank 2 of 3 after regrowing"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestGrowWithDeadNewcomer: a newcomer that took its ticket and died
// before connecting (simulated by taking a ticket in the store, as Join
// does, and never connecting) makes every rank's Grow fail within its
// context, naming the rank that never connected; the old world is still
// usable, so the program goes on with it.
func TestGrowWithDeadNewcomer(t *testing.T) {
	store := rendezvous.NewMemStore()
	w := tcpWorldOn(t, store, 2, comm.Options{Timeout: 20 * time.Second})
	ctx := testkit.Context(t, time.Minute)
	if _, err := store.Add(ctx, "gocomm/grow/tickets", 1); err != nil {
		t.Fatal(err)
	}
	awaitJoiners(t, ctx, w, 1)
	start := time.Now()
	errs := testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		nc, err := c.Grow(gctx)
		if err == nil {
			nc.Close()
			return errors.New("Grow with a dead newcomer succeeded")
		}
		if !strings.Contains(err.Error(), "this Grow admitted rank 2 as newcomers") {
			return fmt.Errorf("Grow's error does not name rank 2 as the newcomer: %w", err)
		}
		t.Logf("rank %d: %v", r, err)
		return nil
	})
	testkit.NoErrors(t, errs)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Grow took %v to fail with a 3 s context", d)
	}
	checkWorld(t, ctx, w)
	awaitJoiners(t, ctx, w, 0)
}
