package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/faults"
	"github.com/gocomm/comm/internal/netns"
)

// TestMain makes the test binary a rank when the command re-executes it.
func TestMain(m *testing.M) {
	if role := os.Getenv(faults.RoleEnv); role != "" {
		os.Exit(rankMain(role))
	}
	os.Exit(m.Run())
}

// The command runs every scenario once (one kill trial and one exit job
// per transport, 20 hostile connections, the partition where namespaces
// can be made) and prints its table:
// a row per scenario whose counts add up.
func TestCommandTinyRun(t *testing.T) {
	args := []string{"-kills", "1", "-exits", "1", "-storm", "20", "-hold", "100ms", "-timeout", "2s", "-hang", "8s", "-seed", "7", "-commit", "test"}
	partition := netns.Available() == nil
	if !partition {
		t.Logf("partition scenario left out: %v", netns.Available())
		args = append(args, "-partition=false")
	}
	var out, errs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if st := run(ctx, args, &out, &errs); st != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", st, out.String(), errs.String())
	}
	text := out.String()
	t.Log(text)
	if !strings.Contains(text, "Measured at commit test,") {
		t.Errorf("no commit line")
	}
	for _, tr := range []string{"shm", "tcp"} {
		row := regexp.MustCompile(`\| kill -9 one rank at a random moment \| ` + tr + ` \| 1 \| (\d)/(\d) trials: every survivor named the killed rank \((\d)/(\d) survivors\)`).FindStringSubmatch(text)
		if row == nil {
			t.Errorf("no kill row for %s", tr)
		} else if row[2] != "1" || row[4] != "3" {
			t.Errorf("kill row for %s: %v (the trial did not run, or survivors miscounted)", tr, row)
		}
		if !regexp.MustCompile(`\| exit right after the last collective, no Close \| ` + tr + ` \| 1 \| 0/1 jobs failed`).MatchString(text) {
			t.Errorf("no exit row for %s, or its job failed", tr)
		}
	}
	if !regexp.MustCompile(`\| 20 hostile connections .* \| tcp \| 1 job \| 0 crashes, 0 wrong results, [1-9]\d* verified all-reduces per rank; half from start-up \(\d+ reached a data listener .* (\d+) of 20 closed by the ranks, (\d+) could not connect`).MatchString(text) {
		t.Errorf("no storm row, or a rank crashed, a result was wrong or the job made no progress")
	}
	if partition && !regexp.MustCompile(`\| partition: .* \| 1 job \| \d/4 ranks named a rank across the partition; \d/4 failed within`).MatchString(text) {
		t.Errorf("no partition row")
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-kills", "-1"}, {"-transports", "udp"}, {"-ranks", "1"}, {"-timeout", "0s"}, {"extra"}, {"-exit-iters", "0"},
	} {
		var errs bytes.Buffer
		if st := run(context.Background(), args, &bytes.Buffer{}, &errs); st != 2 || errs.Len() == 0 {
			t.Errorf("%v: status %d, stderr %q; want 2 and a message", args, st, errs.String())
		}
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 3}, {99, 5}, {0, 1}, {100, 5}, {20, 1}, {21, 2}} {
		if got := percentile(ds, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if percentile(nil, 50) != 0 || ds[0] != 5 {
		t.Errorf("empty input or input modified")
	}
}

func TestRanksNamed(t *testing.T) {
	got := ranksNamed("comm: AllReduce on rank 1: communicator aborted: rank 3: peer connection lost; ranks 2 and rank 12, rank 3")
	if want := []int{1, 3, 2, 12}; !equalInts(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if namesAny("prank 2 frank 22", 2) || !namesAny("by rank 2.", 2) {
		t.Errorf("word boundaries")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseListening(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:7531 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:7532 0100007F:9999 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 100 0 0 10 0
`
	got := parseListening(strings.NewReader(table), map[string]bool{"111": true, "333": true})
	if !equalInts(got, []int{30000}) {
		t.Errorf("got %v, want [30000] (listening and ours only)", got)
	}
}
