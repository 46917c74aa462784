package rendezvous_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// The torchrun test re-executes this test binary as the ranks of a gocomm
// program (testkit.Main): with rankRole set, the process is a rank.
const rankRole = "GOCOMM_RENDEZVOUS_TEST_ROLE"

func TestMain(m *testing.M) {
	testkit.MainErr(m, rankRole, "RANK", rankMain, rendezvous.StopSharedEtcd)
}

// rankMain is the gocomm program: Init from the environment, as any
// program started by torchrun does, then an all-reduce and a barrier.
// Other roles are the etcd tests' (etcdRoles).
func rankMain(role string) error {
	if run, ok := etcdRoles[role]; ok {
		return run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
		return fmt.Errorf("AllReduce gave %v, want %v", buf[0], n*(n+1)/2)
	}
	return comm.Barrier(ctx, c)
}

// torchrun2Env is the environment torchrun 2.x gives worker local rank r
// of a one-node job of n workers (torch/distributed/elastic/agent/server/
// local_elastic_agent.py, _start_workers), the agent's store at port.
func torchrun2Env(r, n int, port, errFile string) []string {
	return []string{
		"LOCAL_RANK=" + strconv.Itoa(r), "RANK=" + strconv.Itoa(r), "GROUP_RANK=0",
		"ROLE_RANK=" + strconv.Itoa(r), "ROLE_NAME=default",
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(n), "WORLD_SIZE=" + strconv.Itoa(n),
		"GROUP_WORLD_SIZE=1", "ROLE_WORLD_SIZE=" + strconv.Itoa(n),
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port,
		"TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_MAX_RESTARTS=0",
		"TORCHELASTIC_RUN_ID=job42", "TORCHELASTIC_USE_AGENT_STORE=True",
		"TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "TORCHELASTIC_ERROR_FILE=" + errFile,
		"GOCOMM_TORCH_STORE=", // probe, as a user who never heard of it
	}
}

// A gocomm program started as torchrun 2.x starts its workers joins the
// agent's store, which speaks only torch 2.x's protocol: our server behind
// a front that refuses other connections as torch 2.x's classic server
// (closing them) or its libuv server (ignoring them) does.
func TestProgramJoinsTorch2AgentStore(t *testing.T) {
	const n = 2
	for _, mode := range []rendezvous.FrontMode{rendezvous.FrontTorch2Classic, rendezvous.FrontTorch2LibUV} {
		t.Run(mode.String(), func(t *testing.T) {
			agent := rendezvous.TorchServer(t, mode)
			_, port, _ := net.SplitHostPort(agent.Addr())
			ctx := testkit.Context(t, 2*time.Minute)
			var wg sync.WaitGroup
			outs := make([]testkit.LockedBuffer, n)
			errs := make([]error, n)
			for r := range n {
				cmd := testkit.RankCommand(ctx, rankRole, "torchrun-2.x",
					torchrun2Env(r, n, port, filepath.Join(t.TempDir(), "error.json"))...)
				cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				wg.Go(func() { errs[r] = cmd.Wait() })
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
				}
			}
			if t.Failed() {
				return
			}
			// Each rank process probed once (the front refused that) and
			// then spoke 2.x on every connection.
			if agent.Refused() != n || agent.Accepted() < n {
				t.Errorf("the front refused %d connections and passed %d: want one probe per rank refused, the rest passed", agent.Refused(), agent.Accepted())
			}
			check, err := rendezvous.DialTCPStore(ctx, agent.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer check.Close()
			if check.TorchProtocol() != 2 {
				t.Errorf("a client of the agent's store speaks torch %d.x", check.TorchProtocol())
			}
			ok, err := check.Check(ctx, "gocomm/torchelastic/job42/attempt_0/gocomm/native/addr/0")
			if err != nil || !ok {
				t.Errorf("rank 0's address is not in the agent's store under the attempt's prefix: %v, %v", ok, err)
			}
		})
	}
}
