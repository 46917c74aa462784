//go:build unix

package main

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/netns"
	"github.com/gocomm/comm/internal/testkit"
)

// TestElasticAcrossHosts: commrun --elastic on two simulated hosts
// (network namespaces), two ranks each, the store on host 0's rank 0; rank
// 3, on host 1, is killed by SIGKILL mid-run; host 1's launcher restarts
// it, the restarted process joins the running world across the network,
// and the job ends on 4 ranks with identical parameters.
func TestElasticAcrossHosts(t *testing.T) {
	bin := buildTrain(t)
	commrun := buildCommrun(t)
	nw := netns.ForTest(t, netns.Options{Hosts: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := &stepKill{victim: 3, atStep: 40, pid: map[int]int{}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, h := range nw.Hosts() {
		args := append([]string{"-n", "2", "--nnodes", "2", "--node-rank", strconv.Itoa(i),
			"--master-addr", nw.Hosts()[0].Addr, "--master-port", "29514", "--timeout", "100s",
			"--elastic", "1:2", "--max-restarts", "1", "--", bin}, elasticArgs...)
		cmd := h.Command(ctx, commrun, args...)
		cmd.Env = testkit.LauncherFreeEnv("GOCOMM_BIND=none")
		cmd.Dir = t.TempDir()
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			// Whole lines, one at a time, as stepKill reads them.
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				w.Write(append(sc.Bytes(), '\n'))
			}
			errs[i] = cmd.Wait()
		})
	}
	wg.Wait()
	got := w.String()
	for i, err := range errs {
		if err != nil {
			t.Errorf("host %d's commrun: %v", i, err)
		}
	}
	if !w.killed || w.err != nil {
		t.Fatalf("rank 3 was not killed (pids %v): %v\n%s", w.pid, w.err, got)
	}
	for _, want := range []string{"commrun: rank 3 failed (killed by signal 9", "restarting it (1 of 1 restarts)",
		"parameters identical on all 4 ranks"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if m := elasticDone.FindAllStringSubmatch(got, -1); len(m) != 1 || m[0][1] != "4" {
		t.Errorf("want one final line of 4 ranks, got %q:\n%s", m, got)
	}
}
