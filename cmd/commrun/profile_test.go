package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/profile"
)

// profiledRank runs the profiler tests' ranks under commrun -profile.
// "profile-no-summary" all-reduces a few times and never calls LogSummary:
// the summary and the traces must come from Close. "straggler" enters each
// of its all-reduces after a random pause of up to 10 ms, as every rank
// does, so that which rank comes last is chance (the pauses are long next
// to the scheduler's sub-millisecond favours); the rank named by
// COMMRUN_TEST_SLOW also pauses 15 ms more, and must be named.
func profiledRank(ctx context.Context, c *comm.Comm, role string) error {
	buf := make([]float32, 16)
	if role == "profile-no-summary" {
		for range 5 {
			if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
				return err
			}
		}
		return nil
	}
	slow := -1
	if s := os.Getenv("COMMRUN_TEST_SLOW"); s != "" {
		slow, _ = strconv.Atoi(s)
	}
	for range 40 {
		pause := rand.N(10 * time.Millisecond)
		if c.Rank() == slow {
			pause += 15 * time.Millisecond
		}
		time.Sleep(pause)
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			return err
		}
	}
	return c.Profiler().LogSummary(ctx, os.Stdout, true)
}

// needProfiler skips a test of the comms logger in a build without it.
func needProfiler(t *testing.T) {
	t.Helper()
	w, err := comm.NewLocalWorld(1, comm.Options{Profile: &profile.Config{Enabled: true, Output: io.Discard}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	on := w[0].Profiler().Enabled()
	w[0].Close()
	if !on {
		t.Skip("the comms logger is compiled out (-tags gocomm_noprofile)")
	}
}

// runCommrun runs commrun with args and the test binary in role as the
// ranks, and returns its combined output and exit status.
func runCommrun(t *testing.T, role string, env []string, args ...string) (string, int) {
	t.Helper()
	bin := buildCommrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args = append(append(args, "--timeout", "100s", "--"), os.Args[0], "-test.run=^$")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = testkit.LauncherFreeEnv(append(env, roleEnv+"="+role)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("commrun: %v\n%s", err, out)
	}
	return string(out), code
}

// Without a LogSummary call, -profile prints rank 0's table when the world
// closes, and -trace-dir gets every rank's trace, merged.
func TestCommrunProfileWithoutLogSummary(t *testing.T) {
	needProfiler(t)
	dir := t.TempDir()
	out, code := runCommrun(t, "profile-no-summary", nil, "-n", "3", "-profile", "-trace-dir", dir)
	if code != 0 {
		t.Fatalf("commrun exited %d:\n%s", code, out)
	}
	for _, want := range []string{
		"[0] gocomm comms logger: rank 0's operations, printed at Close",
		"[0] Comm. Op            Message Size        Count               Total Latency(ms)",
		"[0] all_reduce\n[0]                     64.0 B              5 ",
		"commrun: merged trace",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Comm. Op"); n != 1 {
		t.Errorf("%d summary tables, want one (rank 0's):\n%s", n, out)
	}
	for r := range 3 {
		if _, err := os.Stat(filepath.Join(dir, profile.TraceFileName(r))); err != nil {
			t.Errorf("rank %d's trace: %v", r, err)
		}
	}
	merged, err := os.ReadFile(filepath.Join(dir, profile.MergedTraceName))
	if err != nil || bytes.Count(merged, []byte(`"name":"all_reduce"`)) != 15 {
		t.Errorf("merged trace (%v) does not hold 3 ranks' 5 all-reduces:\n%s", err, merged)
	}
}

// -trace-dir that gets no trace fails the run, saying why; files of an
// earlier run do not count.
func TestCommrunTraceDirWithoutTraces(t *testing.T) {
	dir := t.TempDir()
	out, code := runCommrun(t, "no-comm", nil, "-n", "2", "-trace-dir", dir)
	if code == 0 || !strings.Contains(out, "no rank wrote a trace file there") {
		t.Errorf("commrun exited %d, want non-zero saying no rank wrote a trace:\n%s", code, out)
	}
	old := filepath.Join(dir, profile.TraceFileName(0))
	if err := os.WriteFile(old, []byte(`{"traceEvents":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	out, code = runCommrun(t, "no-comm", nil, "-n", "2", "-trace-dir", dir)
	if code == 0 || !strings.Contains(out, "its 1 trace files are older than this run") {
		t.Errorf("with an earlier run's trace: commrun exited %d, want non-zero saying the file is old:\n%s", code, out)
	}
}

var verdict = regexp.MustCompile(`(?m)^\[0\] (no straggler|straggler: rank (\d+)).*$`)

// A 4-rank run whose ranks are late only by chance names no straggler;
// one with a rank 15 ms late to every collective names it.
func TestCommrunStraggler(t *testing.T) {
	needProfiler(t)
	for _, slow := range []int{-1, 2} {
		var env []string
		if slow >= 0 {
			env = append(env, "COMMRUN_TEST_SLOW="+strconv.Itoa(slow))
		}
		out, code := runCommrun(t, "straggler", env, "-n", "4", "-profile")
		if code != 0 {
			t.Fatalf("slow rank %d: commrun exited %d:\n%s", slow, code, out)
		}
		m := verdict.FindStringSubmatch(out)
		switch {
		case m == nil:
			t.Errorf("slow rank %d: no verdict in:\n%s", slow, out)
		case slow < 0 && m[1] != "no straggler":
			t.Errorf("no slow rank, verdict %q:\n%s", m[0], out)
		case slow >= 0 && m[2] != strconv.Itoa(slow):
			t.Errorf("slow rank %d, verdict %q:\n%s", slow, m[0], out)
		case !strings.Contains(m[0], "expected 1/4 = 25% by chance"):
			t.Errorf("verdict %q does not say what chance would give", m[0])
		}
		if m != nil {
			t.Logf("verdict: %s", m[0])
		}
		if strings.Contains(out, "printed at Close") {
			t.Errorf("slow rank %d: the program called LogSummary, yet Close printed a summary too:\n%s", slow, out)
		}
	}
}
