package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/netns"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/launch"
)

// The training job across simulated hosts: network namespaces with their
// own network stacks joined by a bridge, as a user's machines are. Every
// host runs its launcher with no address or host knob set; the job must
// find addresses the other hosts can reach and end with the parameters a
// job of the same size ends with on one host. Across hosts the gradient
// all-reduce would be hierarchical, which adds in another order than one
// host's ring, so both runs force the ring (sameOrder): the comparison is
// of the network path, bit for bit. The hierarchical schedules are checked
// across hosts in the comm package's multi-host tests.

// sameOrder makes one host and several add gradients in the same order.
const sameOrder = "GOCOMM_ALGO_ALLREDUCE=ring"

// hostRun is one host's launcher run.
type hostRun struct {
	out []byte
	err error
}

// runOnHosts starts args(i) on every host at once and waits for all.
func runOnHosts(t *testing.T, nw *netns.Network, limit time.Duration, name string, args func(i int) []string) []hostRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	runs := make([]hostRun, len(nw.Hosts()))
	var wg sync.WaitGroup
	for i, h := range nw.Hosts() {
		wg.Go(func() {
			cmd := h.Command(ctx, name, args(i)...)
			// The simulated hosts share this machine's CPUs: commrun on
			// each would bind its ranks to the same ones.
			cmd.Env = testkit.LauncherFreeEnv(sameOrder, "GOCOMM_BIND=none")
			cmd.Dir = t.TempDir()
			cmd.WaitDelay = 5 * time.Second
			runs[i].out, runs[i].err = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	for i, r := range runs {
		if r.err != nil {
			t.Errorf("host %d: %v\n%s", i, r.err, r.out)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return runs
}

// oneHostChecksum runs the job on n ranks of this host.
func oneHostChecksum(t *testing.T, bin string, n int) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := launch.Run(ctx, launch.Config{NProcs: n, Program: bin, Args: trainArgs, Env: testkit.LauncherFreeEnv(sameOrder),
		Stdout: &out, Stderr: &out, Timeout: 80 * time.Second})
	if err != nil {
		t.Fatalf("commrun -n %d: %v\n%s", n, err, out.String())
	}
	return checksumOf(t, fmt.Sprintf("commrun -n %d", n), out.Bytes(), n)
}

func buildCommrun(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "commrun")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building commrun needs the go command on PATH: %v", err)
	}
	if out, err := exec.Command(goCmd, "build", "-o", bin, "../../cmd/commrun").CombinedOutput(); err != nil {
		t.Fatalf("go build commrun: %v\n%s", err, out)
	}
	return bin
}

func TestTrainAcrossHosts(t *testing.T) {
	bin := buildTrain(t)
	commrun := buildCommrun(t)
	const port = "29511"

	for _, tc := range []struct {
		name  string
		procs string // commrun -n
		ranks int
	}{
		{"commrun/2 hosts", "2", 4},
		{"commrun/3 hosts, 2+1+2 ranks", "2,1,2", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts := 2
			if tc.procs != "2" {
				hosts = 3
			}
			want := oneHostChecksum(t, bin, tc.ranks)
			nw := netns.ForTest(t, netns.Options{Hosts: hosts})
			master := nw.Hosts()[0].Addr
			runs := runOnHosts(t, nw, 2*time.Minute, commrun, func(i int) []string {
				return append([]string{"-n", tc.procs, "--nnodes", strconv.Itoa(hosts), "--node-rank", strconv.Itoa(i),
					"--master-addr", master, "--master-port", port, "--timeout", "100s", "--", bin}, trainArgs...)
			})
			if got := checksumOf(t, tc.name, runs[0].out, tc.ranks); got != want {
				t.Errorf("checksum across hosts %s, on one host %s", got, want)
			}
		})
	}

	t.Run("torchrun/2 hosts", func(t *testing.T) {
		torchrun, prefix := torchrunCommand(t)
		want := oneHostChecksum(t, bin, 4)
		nw := netns.ForTest(t, netns.Options{Hosts: 2})
		master := nw.Hosts()[0].Addr
		runs := runOnHosts(t, nw, 2*time.Minute, torchrun, func(i int) []string {
			args := append(append([]string(nil), prefix...), "--nnodes", "2", "--node_rank", strconv.Itoa(i),
				"--nproc_per_node", "2", "--master_addr", master, "--master_port", port,
				"--redirects", "1", "--tee", "1", "--no_python", bin)
			return append(args, trainArgs...)
		})
		if got := checksumOf(t, "torchrun --nnodes 2", runs[0].out, 4); got != want {
			t.Errorf("checksum across hosts under torchrun %s, on one host %s", got, want)
		}
	})
}
