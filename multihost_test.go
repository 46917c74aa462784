package comm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/conformance"
	"github.com/gocomm/comm/internal/netns"
	"github.com/gocomm/comm/internal/testkit"
)

// The multi-host tests run ranks of this test binary on simulated hosts:
// network namespaces with their own network stacks (package netns), joined
// by a bridge. Nothing tells the ranks which address to use or which ranks
// share a host: they find both as they would on separate machines.

// multihostRoles are the child roles of these tests (see child).
var multihostRoles = map[string]func(ctx context.Context) error{
	"mh-suite":         childSuite,
	"mh-allreduce":     childAllReduce,
	"mh-until-failure": childUntilFailure,
	"mh-connect-fails": childConnectFails,
}

// childSuite runs the conformance quick suite and checks, from the
// profiler's records, that all-reduce and broadcast ran hierarchically.
func childSuite(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, cs := range conformance.QuickCases() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := cs.Run(cctx, c)
		cancel()
		if err != nil {
			return fmt.Errorf("case %s: %w", cs.Name, err)
		}
	}
	used := map[string]bool{}
	for _, r := range c.Profiler().Records() {
		if r.Algorithm == "hierarchical" {
			used[r.Op] = true
		}
	}
	if !used["all_reduce"] || !used["broadcast"] {
		return fmt.Errorf("hierarchical schedules used for %v, want all_reduce and broadcast", used)
	}
	if err := checkNodeLayout(ctx, c); err != nil {
		return err
	}
	fmt.Printf("rank %d: quick suite passed, hierarchical %v\n", c.Rank(), used)
	return nil
}

// checkNodeLayout compares NodeRank, NodeCount and SplitByHost with where
// the job put the ranks (MH_HOST, MH_HOSTS, LOCAL_RANK, LOCAL_WORLD_SIZE):
// the hosts are told apart by their identities alone.
func checkNodeLayout(ctx context.Context, c *comm.Comm) error {
	env := func(k string) int { v, _ := strconv.Atoi(os.Getenv(k)); return v }
	if c.NodeRank() != env("MH_HOST") || c.NodeCount() != env("MH_HOSTS") {
		return fmt.Errorf("node rank %d of %d, want %d of %d", c.NodeRank(), c.NodeCount(), env("MH_HOST"), env("MH_HOSTS"))
	}
	h, err := c.SplitByHost(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	if h.Rank() != env("LOCAL_RANK") || h.Size() != env("LOCAL_WORLD_SIZE") {
		return fmt.Errorf("SplitByHost: rank %d of %d, want %d of %d", h.Rank(), h.Size(), env("LOCAL_RANK"), env("LOCAL_WORLD_SIZE"))
	}
	return nil
}

func childAllReduce(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]int64, 1<<16)
	for i := range buf {
		buf[i] = int64(i + c.Rank())
	}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	n := int64(c.Size())
	for i, v := range buf {
		if want := n*int64(i) + n*(n-1)/2; v != want {
			return fmt.Errorf("element %d = %d, want %d", i, v, want)
		}
	}
	fmt.Printf("rank %d of %d: all-reduce correct\n", c.Rank(), c.Size())
	return nil
}

// childUntilFailure all-reduces until it fails, which must happen because
// a rank of MH_LOST (a list) is gone, and say so. Its operations have no
// deadline of their own, as most programs' do not: GOCOMM_TIMEOUT bounds
// them.
func childUntilFailure(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]float32, 1<<18)
	for i := 0; ; i++ {
		err := comm.AllReduce(context.Background(), c, buf, buf, comm.Sum)
		if err == nil {
			if i == 0 {
				fmt.Printf("ready %d\n", c.Rank())
			}
			continue
		}
		for _, r := range strings.Split(os.Getenv("MH_LOST"), ",") {
			if strings.Contains(err.Error(), "rank "+r) {
				fmt.Printf("rank %d failed at %s: %v\n", c.Rank(), time.Now().Format(time.RFC3339Nano), err)
				return nil
			}
		}
		return fmt.Errorf("failed without naming a rank of %s: %w", os.Getenv("MH_LOST"), err)
	}
}

// childConnectFails expects Init to fail and prints its error.
func childConnectFails(ctx context.Context) error {
	start := time.Now()
	c, err := comm.Init(ctx, comm.Options{})
	if err == nil {
		c.Close()
		return errors.New("Init succeeded")
	}
	fmt.Printf("Init failed after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
	return nil
}

// rankRun is one rank's process.
type rankRun struct {
	host, rank int
	out        testkit.LockedBuffer // the rank's stdout and stderr
	output     func() string        // reads out while it runs
	err        error
	ended      time.Time
}

// job runs ranks of this binary on simulated hosts: rank r on host
// hosts[r], each with the torchrun variables plus env(rank, host, local)
// (which may override them) and the role.
type job struct {
	t     *testing.T
	nw    *netns.Network
	hosts []int
	role  string
	env   func(rank, host, local int) []string
	limit time.Duration
}

// perHost lists the host of every rank when host h runs counts[h] ranks.
func perHost(counts ...int) []int {
	var hosts []int
	for h, n := range counts {
		for range n {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func (j job) run() []*rankRun {
	j.t.Helper()
	runs, wait := j.start()
	wait()
	return runs
}

// start starts every rank; wait waits for all of them to end.
func (j job) start() (runs []*rankRun, wait func()) {
	t := j.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), j.limit)
	size := len(j.hosts)
	local := map[int]int{}
	for _, h := range j.hosts {
		local[h]++
	}
	seen := map[int]int{}
	var wg sync.WaitGroup
	for rank, h := range j.hosts {
		l := seen[h]
		seen[h]++
		r := &rankRun{host: h, rank: rank}
		runs = append(runs, r)
		cmd := j.nw.Hosts()[h].Command(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(testkit.LauncherFreeEnv(), childEnv+"="+j.role,
			"RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(size),
			"LOCAL_RANK="+strconv.Itoa(l), "LOCAL_WORLD_SIZE="+strconv.Itoa(local[h]),
			"MASTER_ADDR="+j.nw.Hosts()[0].Addr, "MASTER_PORT=29512")
		if j.env != nil {
			cmd.Env = append(cmd.Env, j.env(rank, h, l)...)
		}
		cmd.Stdout, cmd.Stderr = &r.out, &r.out
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		r.output = r.out.String
		wg.Go(func() {
			r.err = cmd.Wait()
			r.ended = time.Now()
		})
	}
	return runs, func() { wg.Wait(); cancel() }
}

func requireAllPassed(t *testing.T, runs []*rankRun) {
	t.Helper()
	for _, r := range runs {
		if r.err != nil {
			t.Errorf("rank %d on host %d: %v\n%s", r.rank, r.host, r.err, r.out.String())
		}
	}
}

// TestMultiHostSuite: 5 ranks on 3 hosts (2+1+2) run the conformance quick
// suite with all-reduce and broadcast forced hierarchical (shared memory
// inside a host, TCP between hosts), and find their hosts (NodeRank,
// SplitByHost).
func TestMultiHostSuite(t *testing.T) {
	nw := netns.ForTest(t, netns.Options{Hosts: 3})
	runs := job{t: t, nw: nw, hosts: perHost(2, 1, 2), role: "mh-suite", limit: 4 * time.Minute,
		env: func(rank, host, local int) []string {
			return []string{"GOCOMM_ALGO_ALLREDUCE=hierarchical", "GOCOMM_ALGO_BROADCAST=hierarchical", "GOCOMM_PROFILE=1", "GOCOMM_TIMEOUT=2m",
				"MH_HOST=" + strconv.Itoa(host), "MH_HOSTS=3"}
		}}.run()
	requireAllPassed(t, runs)
}

// TestMultiHostEnvironments: the same job started as srun would (SLURM
// variables, the master found from the node list by name), over IPv6, and
// with a master whose name resolves to 127.0.1.1 on its own host (Debian's
// default) but to its address elsewhere.
func TestMultiHostEnvironments(t *testing.T) {
	t.Run("srun", func(t *testing.T) {
		nw := netns.ForTest(t, netns.Options{Hosts: 2})
		for _, h := range nw.Hosts() {
			if err := h.SetHosts(map[string]string{"node01": nw.Hosts()[0].Addr, "node02": nw.Hosts()[1].Addr}); err != nil {
				t.Fatal(err)
			}
		}
		runs := job{t: t, nw: nw, hosts: perHost(2, 2), role: "mh-allreduce", limit: 2 * time.Minute,
			env: func(rank, host, local int) []string {
				return []string{"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",
					"SLURM_PROCID=" + strconv.Itoa(rank), "SLURM_NTASKS=4", "SLURM_LOCALID=" + strconv.Itoa(local),
					"SLURM_NODEID=" + strconv.Itoa(host), "SLURM_STEP_NODELIST=node[01-02]", "SLURM_JOB_NODELIST=node[01-02]",
					"SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0",
					"SLURMD_NODENAME=node0" + strconv.Itoa(host+1)}
			}}.run()
		requireAllPassed(t, runs)
	})
	t.Run("ipv6", func(t *testing.T) {
		nw := netns.ForTest(t, netns.Options{Hosts: 2, IPv6: true})
		runs := job{t: t, nw: nw, hosts: perHost(2, 1), role: "mh-allreduce", limit: 2 * time.Minute,
			env: func(rank, host, local int) []string { return []string{"MASTER_ADDR=" + nw.Hosts()[0].Addr6} }}.run()
		requireAllPassed(t, runs)
	})
	t.Run("master's name is loopback on its host", func(t *testing.T) {
		nw := netns.ForTest(t, netns.Options{Hosts: 2})
		nw.Hosts()[0].SetHosts(map[string]string{"master-host": "127.0.1.1"})
		nw.Hosts()[1].SetHosts(map[string]string{"master-host": nw.Hosts()[0].Addr})
		runs := job{t: t, nw: nw, hosts: perHost(2, 2), role: "mh-allreduce", limit: 2 * time.Minute,
			env: func(rank, host, local int) []string { return []string{"MASTER_ADDR=master-host"} }}.run()
		requireAllPassed(t, runs)
	})
}

// TestMultiHostDeadHost: a host's link goes down mid-job (a pulled cable,
// a dead machine, a partition); the ranks of both hosts fail within the
// timeout (and the short exchange of flight recorders after it) with
// errors that name a rank of the other host, also those that waited only
// for a rank of their own host: they learned whom it waits for.
func TestMultiHostDeadHost(t *testing.T) {
	const timeout = 8 * time.Second
	nw := netns.ForTest(t, netns.Options{Hosts: 2})
	runs, wait := job{t: t, nw: nw, hosts: perHost(2, 2), role: "mh-until-failure", limit: 2 * time.Minute,
		env: func(rank, host, local int) []string {
			lost := "2,3"
			if host == 1 {
				lost = "0,1"
			}
			return []string{"GOCOMM_TIMEOUT=" + timeout.String(), "MH_LOST=" + lost}
		}}.start()
	// Pull host 1's link once every rank has finished an all-reduce.
	awaitReady(t, runs)
	down := time.Now()
	if err := nw.Hosts()[1].SetLink(false); err != nil {
		t.Fatal(err)
	}
	wait()
	for _, r := range runs {
		out := r.out.String()
		if r.err != nil {
			t.Errorf("rank %d: %v\n%s", r.rank, r.err, out)
			continue
		}
		// The operation in flight when the link went down fails within the
		// timeout plus the exchange of flight recorders (a fortieth of the
		// timeout, 200 ms) and a little slack for a loaded machine; Close
		// may take longer.
		m := failedAt.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("rank %d did not say when it failed:\n%s", r.rank, out)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatal(err)
		}
		if took := at.Sub(down); took > timeout+500*time.Millisecond {
			t.Errorf("rank %d failed %v after the link went down (timeout %v)", r.rank, took, timeout)
		}
		if took := r.ended.Sub(down); took > 2*timeout+5*time.Second {
			t.Errorf("rank %d exited only %v after the link went down", r.rank, took)
		}
		t.Logf("rank %d failed %v after the link went down: %s", r.rank, at.Sub(down).Round(time.Millisecond), strings.TrimSpace(out))
	}
}

var failedAt = regexp.MustCompile(`failed at (\S+):`)

// awaitReady waits until every rank has printed "ready <rank>" (after its
// first all-reduce), for at most a minute.
func awaitReady(t *testing.T, runs []*rankRun) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for ready := 0; ready < len(runs); {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d ranks finished a first all-reduce within a minute", ready, len(runs))
		}
		time.Sleep(50 * time.Millisecond)
		ready = 0
		for _, r := range runs {
			if strings.Contains(r.output(), fmt.Sprintf("ready %d", r.rank)) {
				ready++
			}
		}
	}
}

// TestMultiHostUnreachableAddress: a rank that publishes an address other
// hosts cannot reach (an interface only its own host has), or a loopback
// address, makes Init fail within the timeout on every rank, with an error
// that names the rank, the address and the fix.
func TestMultiHostUnreachableAddress(t *testing.T) {
	const timeout = 6 * time.Second
	for _, tc := range []struct {
		name     string
		knob     string // for rank 1, on host 1
		want     []string
		quickest time.Duration // rank 2 gives up no sooner than this
	}{
		{"interface others cannot reach", "GOCOMM_SOCKET_IFNAME=gcu", []string{"cannot connect to rank 1 at 10.99.0.2:", "no route to it from here"}, timeout - time.Second},
		{"loopback", "GOCOMM_SOCKET_HOST=127.0.0.1", []string{"cannot connect to rank 1 at 127.0.0.1:", "published a loopback address", "GOCOMM_SOCKET_IFNAME"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := netns.ForTest(t, netns.Options{Hosts: 2})
			if err := nw.Hosts()[1].AddDummy("gcu", "10.99.0.2/24"); err != nil {
				t.Fatal(err)
			}
			// Ranks 0 and 2 on host 0, rank 1 on host 1: rank 2 dials rank 1.
			start := time.Now()
			results := job{t: t, nw: nw, hosts: []int{0, 1, 0}, role: "mh-connect-fails", limit: time.Minute,
				env: func(rank, host, local int) []string {
					env := []string{"GOCOMM_TIMEOUT=" + timeout.String()}
					if rank == 1 {
						env = append(env, tc.knob)
					}
					return env
				}}.run()
			for _, r := range results {
				if r.err != nil {
					t.Errorf("rank %d: %v\n%s", r.rank, r.err, r.out.String())
				}
				if took := r.ended.Sub(start); took > timeout+5*time.Second {
					t.Errorf("rank %d failed only after %v (timeout %v)", r.rank, took, timeout)
				}
			}
			out2 := results[2].out.String()
			for _, want := range tc.want {
				if !strings.Contains(out2, want) {
					t.Errorf("rank 2's error lacks %q:\n%s", want, out2)
				}
			}
			if took := results[2].ended.Sub(start); took < tc.quickest {
				t.Errorf("rank 2 gave up after %v, before the timeout", took)
			}
			t.Logf("rank 2: %s", strings.TrimSpace(out2))
			t.Logf("rank 1: %s", strings.TrimSpace(results[1].out.String()))
		})
	}
}
