package comm_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// hostWorld starts len(hosts) ranks over TCP on loopback, rank r with host
// identity hosts[r]: through Options.HostID, or, with viaEnv, through
// GOCOMM_HOST_ID.
func hostWorld(t *testing.T, hosts []string, viaEnv bool) []*comm.Comm {
	t.Helper()
	store := rendezvous.NewMemStore()
	n := len(hosts)
	w := make([]*comm.Comm, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() {
			o := comm.Options{Rank: i, Size: n, Store: store, Timeout: time.Minute, Transport: comm.TransportOptions{Kind: comm.TransportTCP, ListenHost: "127.0.0.1"}}
			o.Getenv = func(string) string { return "" }
			if viaEnv {
				o.Getenv = func(k string) string {
					if k == "GOCOMM_HOST_ID" {
						return hosts[i]
					}
					return ""
				}
			} else {
				o.Transport.HostID = hosts[i]
			}
			w[i], errs[i] = comm.Init(ctx, o)
		})
	}
	wg.Wait()
	t.Cleanup(func() { testkit.CloseAll(w) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: Init: %v", i, err)
		}
	}
	return w
}

// checkHosts checks NodeRank, NodeCount and SplitByHost on every rank of
// c (a world or a group over w's processes): want[r] is the host index
// of rank r of c.
func checkHosts(t *testing.T, cs []*comm.Comm, want []int) {
	t.Helper()
	count := slices.Max(want) + 1
	errs := testkit.OnEveryRank(cs, func(_ int, c *comm.Comm) error {
		r := c.Rank()
		if got := c.NodeRank(); got != want[r] {
			t.Errorf("rank %d: NodeRank %d, want %d", r, got, want[r])
		}
		if got := c.NodeCount(); got != count {
			t.Errorf("rank %d: NodeCount %d, want %d", r, got, count)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		h, err := c.SplitByHost(ctx)
		if err != nil {
			return err
		}
		var mates []int // c's ranks on this host, in order, as world ranks
		for q, hq := range want {
			if hq == want[r] {
				g, _ := c.GlobalRank(q)
				mates = append(mates, g)
			}
		}
		if got := h.Ranks(); !slices.Equal(got, mates) {
			t.Errorf("rank %d: SplitByHost has world ranks %v, want %v", r, got, mates)
		}
		if h.NodeCount() != 1 || h.NodeRank() != 0 {
			t.Errorf("rank %d: the host's communicator spans %d hosts (node rank %d), want 1 (0)", r, h.NodeCount(), h.NodeRank())
		}
		// It works: the sum of the members' world ranks.
		g, _ := c.GlobalRank(r)
		sum := []int64{int64(g)}
		if err := comm.AllReduce(ctx, h, sum, sum, comm.Sum); err != nil {
			return err
		}
		wantSum := int64(0)
		for _, m := range mates {
			wantSum += int64(m)
		}
		if sum[0] != wantSum {
			t.Errorf("rank %d: all-reduce on the host's communicator: %d, want %d", r, sum[0], wantSum)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}

// TestSplitByHost: simulated hosts (Options.HostID and GOCOMM_HOST_ID) on
// a world and on a group whose rank order differs from the world's.
func TestSplitByHost(t *testing.T) {
	hosts := []string{"a", "b", "a", "c", "b"}
	for _, viaEnv := range []bool{false, true} {
		w := hostWorld(t, hosts, viaEnv)
		checkHosts(t, w, []int{0, 1, 0, 2, 1})
		// The group of world ranks 4, 3, 2, 1, 0: hosts b, c, a, b, a.
		groups := make([]*comm.Comm, len(w))
		testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) (err error) {
			groups[r], err = c.NewGroup(context.Background(), []int{4, 3, 2, 1, 0})
			return err
		}))
		checkHosts(t, groups, []int{0, 1, 2, 0, 2})
	}
}

// TestSplitByHostOneProcess: an in-process world is one host.
func TestSplitByHostOneProcess(t *testing.T) {
	checkHosts(t, localWorld(t, 3), []int{0, 0, 0})
}

// TestSplitByHostByName: a backend that cannot tell hosts apart reports
// no node rank, and SplitByHost compares hostnames (one machine here).
func TestSplitByHostByName(t *testing.T) {
	w := tcpWorld(t, 3, comm.Options{Timeout: time.Minute, Backend: "native-no-user-ops", Transport: comm.TransportOptions{Kind: comm.TransportTCP}})
	errs := testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		if c.NodeRank() != -1 || c.NodeCount() != 0 {
			t.Errorf("rank %d: NodeRank %d, NodeCount %d on a backend without a host layout, want -1, 0", r, c.NodeRank(), c.NodeCount())
		}
		h, err := c.SplitByHost(context.Background())
		if err != nil {
			return err
		}
		if !slices.Equal(h.Ranks(), []int{0, 1, 2}) {
			t.Errorf("rank %d: SplitByHost by hostname: %v, want every rank", r, h.Ranks())
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}
