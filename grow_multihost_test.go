package comm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/netns"
	"github.com/gocomm/comm/internal/testkit"
)

func init() {
	multihostRoles["mh-grow-first"] = childGrowFirst
	multihostRoles["mh-grow-newcomer"] = childGrowNewcomer
}

// checkLayout says whether c has size ranks on hosts hosts with
// localSize ranks each.
func checkLayout(c *comm.Comm, size, hosts, localSize int) error {
	if c.Size() != size || c.NodeCount() != hosts || c.LocalSize() != localSize || c.LocalRank() >= localSize {
		return fmt.Errorf("rank %d of %d on node %d of %d, local rank %d of %d; want %d ranks on %d hosts, %d per host",
			c.Rank(), c.Size(), c.NodeRank(), c.NodeCount(), c.LocalRank(), c.LocalSize(), size, hosts, localSize)
	}
	got := []int64{1}
	return comm.AllReduce(context.Background(), c, got, got, comm.Sum)
}

// childGrowFirst is one of the two first ranks (host 0) of
// TestMultiHostGrowAndShrink: it grows to four when host 1's two newcomers
// wait, then shrinks back to two when host 1 is gone.
func childGrowFirst(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := checkLayout(c, 2, 1, 2); err != nil {
		return err
	}
	fmt.Printf("ready %d\n", c.Rank())
	for {
		n, err := c.Joiners(ctx)
		if err != nil {
			return err
		}
		if n == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	grown, err := c.Grow(ctx)
	if err != nil {
		return err
	}
	defer grown.Close()
	if err := checkLayout(grown, 4, 2, 2); err != nil {
		return err
	}
	fmt.Printf("rank %d: grown to 4 ranks on 2 hosts\n", grown.Rank())
	buf := []float32{1}
	for comm.AllReduce(ctx, grown, buf, buf, comm.Sum) == nil {
	}
	// Half of Shrink's context is how long it waits for ranks no error
	// named as lost (here one of host 1's two).
	sctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	shrunk, err := grown.Shrink(sctx)
	cancel()
	if err != nil {
		return err
	}
	defer shrunk.Close()
	if err := checkLayout(shrunk, 2, 1, 2); err != nil {
		return err
	}
	fmt.Printf("rank %d: shrunk to 2 ranks on 1 host\n", shrunk.Rank())
	return nil
}

// childGrowNewcomer is one of host 1's processes: started with
// GOCOMM_JOIN=1, its Init joins the running world; it waits to be killed.
func childGrowNewcomer(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	if err := checkLayout(c, 4, 2, 2); err != nil {
		return err
	}
	fmt.Printf("rank %d: joined, 4 ranks on 2 hosts\n", c.Rank())
	buf := []float32{1}
	for comm.AllReduce(ctx, c, buf, buf, comm.Sum) == nil {
	}
	return nil
}

// TestMultiHostGrowAndShrink: two ranks on host 0 start a world; two
// processes started later on host 1 join it (GOCOMM_JOIN=1), and the world
// grows to 4 ranks on 2 hosts, with node and local ranks of its own; host
// 1's processes are then killed (the host is removed) and the survivors
// shrink back to 2 ranks on 1 host. Both continue.
func TestMultiHostGrowAndShrink(t *testing.T) {
	nw := netns.ForTest(t, netns.Options{Hosts: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type proc struct {
		out  testkit.LockedBuffer
		cmd  *exec.Cmd
		err  error
		done chan struct{}
	}
	start := func(host int, role string, vars ...string) *proc {
		p := &proc{done: make(chan struct{})}
		cmd := nw.Hosts()[host].Command(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(testkit.LauncherFreeEnv(), append([]string{childEnv + "=" + role,
			"MASTER_ADDR=" + nw.Hosts()[0].Addr, "MASTER_PORT=29513", "GOCOMM_TIMEOUT=30s"}, vars...)...)
		cmd.Stdout, cmd.Stderr = &p.out, &p.out
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.cmd = cmd
		go func() { p.err = cmd.Wait(); close(p.done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-p.done })
		return p
	}
	awaitLine := func(p *proc, line string) {
		t.Helper()
		for !strings.Contains(p.out.String(), line) {
			select {
			case <-p.done:
				t.Fatalf("ended before %q: %v\n%s", line, p.err, p.out.String())
			case <-ctx.Done():
				t.Fatalf("no %q before the deadline:\n%s", line, p.out.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	first := []*proc{
		start(0, "mh-grow-first", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2"),
		start(0, "mh-grow-first", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2"),
	}
	awaitLine(first[0], "ready 0")
	awaitLine(first[1], "ready 1")
	var newcomers []*proc
	for range 2 {
		newcomers = append(newcomers, start(1, "mh-grow-newcomer", "GOCOMM_JOIN=1"))
	}
	for _, p := range newcomers {
		awaitLine(p, "joined, 4 ranks on 2 hosts")
	}
	for i, p := range first {
		awaitLine(p, fmt.Sprintf("rank %d: grown to 4 ranks on 2 hosts", i))
	}
	// Host 1 goes away: its processes are killed.
	for _, p := range newcomers {
		p.cmd.Process.Kill()
	}
	for i, p := range first {
		<-p.done
		if p.err != nil || !strings.Contains(p.out.String(), fmt.Sprintf("rank %d: shrunk to 2 ranks on 1 host", i)) {
			t.Errorf("rank %d: %v\n%s", i, p.err, p.out.String())
		}
	}
}

func init() { multihostRoles["mh-partition-shrink"] = childPartitionShrink }

// childPartitionShrink all-reduces until a failure, then shrinks, and says
// how that ended: the world it is in, or why it has none.
func childPartitionShrink(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]float32, 1<<10)
	// No deadline of their own, as most programs' operations: GOCOMM_TIMEOUT
	// bounds them.
	for i := 0; comm.AllReduce(context.Background(), c, buf, buf, comm.Sum) == nil; i++ {
		if i == 0 {
			fmt.Printf("ready %d\n", c.Rank())
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	shrunk, err := c.Shrink(sctx)
	if err != nil {
		fmt.Printf("rank %d: no world: %v\n", c.Rank(), err)
		return nil
	}
	defer shrunk.Close()
	if err := comm.AllReduce(ctx, shrunk, buf, buf, comm.Sum); err != nil {
		return err
	}
	fmt.Printf("rank %d: in a world of %d as rank %d\n", c.Rank(), shrunk.Size(), shrunk.Rank())
	return nil
}

// TestMultiHostPartitionShrink: a network partition cuts host 1 (ranks 2
// and 3) off from host 0 (ranks 0 and 1, and the store rank 0 hosts); every
// rank's collective fails, every rank shrinks, and there is one world
// after: host 0's two ranks go on, host 1's get an error (they cannot reach
// the store), never a second world that also thinks it is the job.
func TestMultiHostPartitionShrink(t *testing.T) {
	nw := netns.ForTest(t, netns.Options{Hosts: 2})
	runs, wait := job{t: t, nw: nw, hosts: perHost(2, 2), role: "mh-partition-shrink", limit: 2 * time.Minute,
		env: func(rank, host, local int) []string { return []string{"GOCOMM_TIMEOUT=6s"} }}.start()
	awaitReady(t, runs)
	if err := nw.Hosts()[1].SetLink(false); err != nil {
		t.Fatal(err)
	}
	wait()
	for _, r := range runs {
		out := r.out.String()
		want := fmt.Sprintf("rank %d: in a world of 2 as rank %d", r.rank, r.rank)
		if r.host == 1 {
			want = fmt.Sprintf("rank %d: no world:", r.rank)
		}
		if r.err != nil || !strings.Contains(out, want) {
			t.Errorf("rank %d on host %d: %v; want %q in:\n%s", r.rank, r.host, r.err, want, out)
		}
	}
}
