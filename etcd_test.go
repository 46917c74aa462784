package comm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// The etcd tests run real ranks (launchRanks) that meet in a real etcd
// server the test starts (GOCOMM_INIT_METHOD=etcd://...): nobody hosts the
// store, so the job survives the loss of rank 0.

var etcdRoles = map[string]func(ctx context.Context) error{
	"etcd-allreduce": etcdAllReduceRank,
	"etcd-kill0":     etcdKill0Rank,
}

func etcdAllReduceRank(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := []float64{float64(c.Rank() + 1)}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return err
	}
	if n := c.Size(); buf[0] != float64(n*(n+1)/2) {
		return fmt.Errorf("all-reduce gave %v, want %v", buf[0], n*(n+1)/2)
	}
	return comm.Barrier(ctx, c)
}

// etcdKill0Rank: rank 0 is killed with SIGKILL after the first
// all-reduce; the others find out, shrink past it and all-reduce on the
// world of the survivors.
func etcdKill0Rank(ctx context.Context) error {
	c, err := comm.Init(ctx, comm.Options{Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	size := c.Size()
	one := []int64{1}
	if err := comm.AllReduce(ctx, c, one, one, comm.Sum); err != nil {
		return err
	}
	if one[0] != int64(size) {
		return fmt.Errorf("first all-reduce gave %d, want %d", one[0], size)
	}
	if c.Rank() == 0 {
		me, _ := os.FindProcess(os.Getpid())
		me.Kill() // SIGKILL: nothing is closed, no key is revoked
		select {}
	}
	start := time.Now()
	for i := 0; ; i++ {
		buf := []int64{1}
		err := comm.AllReduce(ctx, c, buf, buf, comm.Sum)
		if err != nil {
			fmt.Printf("rank %d: all-reduce %d failed after %v: %v\n", c.Rank(), i, time.Since(start).Round(time.Millisecond), err)
			break
		}
		if time.Since(start) > 30*time.Second {
			return errors.New("all-reduces keep succeeding without rank 0")
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	nc, err := c.Shrink(sctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	if nc.Size() != size-1 || nc.Rank() != c.Rank()-1 {
		return fmt.Errorf("shrunk world: rank %d of %d, want %d of %d", nc.Rank(), nc.Size(), c.Rank()-1, size-1)
	}
	got := []int64{int64(c.Rank()), 1}
	if err := comm.AllReduce(ctx, nc, got, got, comm.Sum); err != nil {
		return fmt.Errorf("all-reduce on the shrunk world: %w", err)
	}
	want := int64(size * (size - 1) / 2) // ranks 1..size-1
	if got[0] != want || got[1] != int64(size-1) {
		return fmt.Errorf("all-reduce on the shrunk world gave %v, want [%d %d]", got, want, size-1)
	}
	if err := comm.Barrier(ctx, nc); err != nil {
		return err
	}
	fmt.Printf("rank %d: shrunk to rank %d of %d, sum %d\n", c.Rank(), nc.Rank(), nc.Size(), got[0])
	return nil
}

func etcdPrefix(t *testing.T) string { return "/gocomm/" + strings.ReplaceAll(t.Name(), "/", "-") }

func etcdInitMethod(t *testing.T, srv *testkit.Etcd) string {
	return "GOCOMM_INIT_METHOD=etcd://" + srv.Endpoint() + etcdPrefix(t) + "?ttl=3s"
}

func TestEtcdMultiProcessAllReduce(t *testing.T) {
	srv := testkit.StartEtcd(t)
	errs, outs := launchRanks(t, 4, "etcd-allreduce", 2*time.Minute, etcdInitMethod(t, srv))
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r])
		}
	}
	// The last rank to close removed the job's keys.
	ctx := testkit.Context(t, 30*time.Second)
	st, err := rendezvous.NewEtcdStore(ctx, []string{srv.Endpoint()}, etcdPrefix(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.NumKeys(ctx); err != nil || n != 0 {
		t.Errorf("keys left under %s after the job: %d, %v", etcdPrefix(t), n, err)
	}
}

// Rank 0 of 4 is killed mid-job: with the store in etcd the three others
// shrink past it and go on, over TCP and over shared memory.
func TestEtcdRank0KilledSurvivorsShrink(t *testing.T) {
	srv := testkit.StartEtcd(t)
	for _, tr := range multiProcessTransports {
		t.Run(tr, func(t *testing.T) {
			errs, outs := launchRanks(t, 4, "etcd-kill0", 2*time.Minute, etcdInitMethod(t, srv), "GOCOMM_TRANSPORT="+tr)
			var exit *exec.ExitError
			if !errors.As(errs[0], &exit) || exit.Exited() {
				t.Errorf("rank 0 should have been killed by a signal: %v\n%s", errs[0], outs[0])
			}
			for r := 1; r < len(errs); r++ {
				if errs[r] != nil || !strings.Contains(outs[r], "shrunk to rank") {
					t.Errorf("rank %d: %v\n%s", r, errs[r], outs[r])
				} else {
					t.Logf("rank %d: %s", r, strings.TrimSpace(outs[r]))
				}
			}
		})
	}
}
