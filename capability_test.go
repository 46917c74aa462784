package comm_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// TestBackendName: Backend names the driver the world was opened with,
// on the world and on its groups.
func TestBackendName(t *testing.T) {
	local := localWorld(t, 2)
	if got := local[0].Backend(); got != "native" {
		t.Errorf("NewLocalWorld: Backend() = %q, want native", got)
	}
	world := tcpWorld(t, 2, comm.Options{Timeout: time.Minute, Backend: "native-2hosts"})
	groups := make([]*comm.Comm, 2)
	testkit.NoErrors(t, testkit.OnEveryRank(world, func(r int, c *comm.Comm) (err error) {
		groups[r], err = c.Split(context.Background(), 0, r)
		return err
	}))
	t.Cleanup(func() { testkit.CloseAll(groups) })
	for r := range world {
		if got := world[r].Backend(); got != "native-2hosts" {
			t.Errorf("rank %d: Backend() = %q, want native-2hosts", r, got)
		}
		if got := groups[r].Backend(); got != "native-2hosts" {
			t.Errorf("rank %d's group: Backend() = %q, want native-2hosts", r, got)
		}
	}
}

// TestSupports: DeepSpeed's has_* queries answer true on the native
// backend, and so does CapUserOps (it runs NewOp's ops); a group this
// rank is not in, or a value that names no capability, supports nothing.
func TestSupports(t *testing.T) {
	world := localWorld(t, 2)
	want := map[comm.Capability]bool{
		comm.CapAllReduceCoalesced: true, comm.CapAllGatherCoalesced: true,
		comm.CapAllGatherIntoTensor: true, comm.CapReduceScatterTensor: true,
		comm.CapUserOps: true, comm.CapInferenceAllReduce: true,
		comm.CapMonitoredBarrier: true, comm.CapAnySourceRecv: true,
	}
	for cp, w := range want {
		if got := world[0].Supports(cp); got != w {
			t.Errorf("Supports(%v) = %v, want %v", cp, got, w)
		}
	}
	if len(comm.Capabilities()) < len(want) {
		t.Errorf("Capabilities() = %v, shorter than the %d checked here", comm.Capabilities(), len(want))
	}
	for _, cp := range comm.Capabilities() {
		if s := cp.String(); s == "" || strings.HasPrefix(s, "Capability(") {
			t.Errorf("capability %d has no name: %q", uint8(cp), s)
		}
	}
	if world[0].Supports(comm.Capability(0)) || world[0].Supports(comm.Capability(200)) {
		t.Error("a value naming no capability is supported")
	}
	if got := comm.Capability(200).String(); got != "Capability(200)" {
		t.Errorf("Capability(200).String() = %q", got)
	}
	groups := make([]*comm.Comm, 2)
	testkit.NoErrors(t, testkit.OnEveryRank(world, func(r int, c *comm.Comm) (err error) {
		groups[r], err = c.NewGroup(context.Background(), []int{0})
		return err
	}))
	t.Cleanup(func() { testkit.CloseAll(groups) })
	if groups[1].Supports(comm.CapUserOps) {
		t.Error("a non-member supports CapUserOps")
	}
	if !groups[0].Supports(comm.CapAllReduceCoalesced) || groups[1].Supports(comm.CapAllReduceCoalesced) {
		t.Errorf("group member supports %v, non-member %v; want true, false",
			groups[0].Supports(comm.CapAllReduceCoalesced), groups[1].Supports(comm.CapAllReduceCoalesced))
	}
}

// TestInitWithInitMethod: two ranks meet through Options.InitMethod alone
// (a file store, then rank 0's TCP store) and all-reduce.
func TestInitWithInitMethod(t *testing.T) {
	for _, method := range []string{
		"file://" + filepath.Join(t.TempDir(), "job.store"),
		"tcp://127.0.0.1:" + strconv.Itoa(testkit.FreePort(t)),
	} {
		t.Run(method[:4], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			world := make([]*comm.Comm, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r := range world {
				wg.Go(func() {
					world[r], errs[r] = comm.Init(ctx, comm.Options{Rank: r, Size: 2, InitMethod: method,
						Transport: comm.TransportOptions{Kind: comm.TransportTCP, ListenHost: "127.0.0.1"}, Timeout: 30 * time.Second,
						Getenv: func(string) string { return "" }})
				})
			}
			wg.Wait()
			t.Cleanup(func() { testkit.CloseAll(world) })
			testkit.NoErrors(t, errs)
			sums := make([][]int, 2)
			testkit.NoErrors(t, testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
				sums[r] = []int{r + 1}
				return comm.AllReduce(ctx, c, sums[r], sums[r], comm.Sum)
			}))
			if sums[0][0] != 3 || sums[1][0] != 3 || world[0].Backend() != "native" {
				t.Fatalf("sums %v, backend %q", sums, world[0].Backend())
			}
		})
	}
}
