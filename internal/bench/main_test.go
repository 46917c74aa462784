package bench

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/launch"
)

// helperEnv makes the test binary act as commbench (see TestMain): the
// helper-process pattern, for real multi-process runs.
const helperEnv = "COMMBENCH_TEST_MAIN"

func TestMain(m *testing.M) {
	testkit.Main(m, helperEnv, func(string) int {
		return Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	})
}

// cleanEnv is this environment without any launcher's variables or
// gocomm's own, plus the helper switch.
func cleanEnv() []string {
	var env []string
	for _, kv := range testkit.LauncherFreeEnv() {
		if !strings.HasPrefix(kv, "GOCOMM_") {
			env = append(env, kv)
		}
	}
	return append(env, helperEnv+"=1")
}

// commbench as a user runs it: no launcher, so it spawns its ranks;
// without --transport, as the library connects any program (auto: shared
// memory on one host), and the label says so.
func TestCommbenchSpawnsItsRanks(t *testing.T) {
	for _, tc := range []struct{ transport, series, header string }{
		{"tcp", "native/tcp", "transport tcp\n"},
		{"shm", "native/shm", "transport shm\n"},
		{"", "native/auto-shm", "transport auto (the library's default: shared memory, every rank on this host)\n"},
	} {
		t.Run(cmp.Or(tc.transport, "default"), func(t *testing.T) { testCommbenchSpawns(t, tc.transport, tc.series, tc.header) })
	}
}

func testCommbenchSpawns(t *testing.T, transport, series, header string) {
	dir := t.TempDir()
	args := []string{"-n", "2", "--op", "all", "-b", "8", "-e", "1K", "-f", "8", "-w", "1", "-i", "2", "--check", "-q",
		"--json", filepath.Join(dir, "r.json"), "--csv", filepath.Join(dir, "r.csv"), "--plot", filepath.Join(dir, "r.svg")}
	if transport != "" {
		args = append(args, "--transport", transport)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("commbench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"# commbench: " + series + ", 2 ranks", header, "# allreduce\n", "# alltoall\n", "# pingpong\n", "# barrier\n", "Out of bounds values : 0 OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[0] ") || strings.Contains(out, "[1] ") {
		t.Errorf("rank prefixes in the report:\n%s", out)
	}
	f, err := os.Open(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Meta) != 1 || rep.Meta[0].Ranks != 2 || len(opsOf(rep.Results)) != len(AllOps) ||
		rep.Meta[0].Series != series || rep.Results[0].Series != series {
		t.Errorf("JSON: %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Wrong != 0 {
			t.Errorf("%v %d B: %d wrong", r.Op, r.Bytes, r.Wrong)
		}
	}
	for _, name := range []string{"r.csv", "r.svg"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Under a launcher (commrun's launch.Run here) commbench joins its world;
// with --plan and --raw it is the gocomm series of commbench compare.
func TestCommbenchUnderALauncher(t *testing.T) {
	dir := t.TempDir()
	plan := Plan{DType: core.Int32, RedOp: core.Max, Check: true, Cases: []Case{
		{Op: AllReduce, Bytes: 64, Warmup: 1, Iters: 3}, {Op: Broadcast, Bytes: 48, Iters: 2, Root: 2}, {Op: Barrier, Iters: 2},
	}}
	planPath, rawPath := filepath.Join(dir, "plan.txt"), filepath.Join(dir, "raw.txt")
	if err := writeFile(planPath, func(w io.Writer) error { return WritePlan(w, plan) }); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := launch.Run(context.Background(), launch.Config{
		NProcs: 3, Program: os.Args[0], Args: []string{"--plan", planPath, "--raw", rawPath, "-q", "-n", "5"},
		Env: cleanEnv(), Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "-n 5 ignored: the launcher started 3 ranks") {
		t.Errorf("no warning about -n:\n%s", out.String())
	}
	samples, err := readRaw(rawPath, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 3 {
		t.Fatalf("%d samples", len(samples))
	}
	for i, s := range samples {
		if s.Case.Op != plan.Cases[i].Op || s.Bytes != plan.Cases[i].Bytes || s.Root != plan.Cases[i].Root || s.Wrong != 0 || len(s.Times) != plan.Cases[i].Iters || s.Loop <= 0 {
			t.Errorf("sample %d = %+v for case %+v", i, s, plan.Cases[i])
		}
	}
}

func TestExecuteInproc(t *testing.T) {
	dir := t.TempDir()
	cfg, err := ParseArgs([]string{"-n", "3", "--transport", "inproc", "--op", "allreduce,alltoall@96", "-b", "8", "-e", "64", "-i", "2", "-w", "0", "-c", "--csv", filepath.Join(dir, "r.csv")}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := Execute(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "# commbench: native/inproc, 3 ranks") || !strings.Contains(out.String(), "0 OK") {
		t.Errorf("output:\n%s", out.String())
	}
	if strings.Count(out.String(), "# commbench:") != 1 {
		t.Errorf("more than rank 0 reported:\n%s", out.String())
	}
}

func TestExecuteErrors(t *testing.T) {
	cfg, _ := ParseArgs([]string{"--plan", "/nonexistent/plan", "-n", "1"}, &bytes.Buffer{})
	if err := Execute(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--plan") {
		t.Errorf("missing plan: %v", err)
	}
	if code := Main(context.Background(), []string{"--op", "nosuch"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("bad flags: exit %d, want 2", code)
	}
	if code := Main(context.Background(), []string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	if code := Main(context.Background(), []string{"compare", "--runs", "0"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("compare with bad flags: exit %d, want 2", code)
	}
}

func TestRankZeroWriter(t *testing.T) {
	var buf bytes.Buffer
	w := rankZeroWriter{&buf}
	for _, line := range []string{"[0] # allreduce\n", "[1] commbench: boom\n", "[10] x\n", "plain\n"} {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Errorf("Write(%q) = %d, %v", line, n, err)
		}
	}
	if got := buf.String(); got != "# allreduce\n[1] commbench: boom\n[10] x\nplain\n" {
		t.Errorf("got %q", got)
	}
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, 3, false)
	p.step(0, Case{Op: AllReduce, Bytes: 8})
	if buf.Len() != 0 {
		t.Errorf("progress printed before %v: %q", progressEvery, buf.String())
	}
	p.last = p.last.Add(-progressEvery)
	p.step(1, Case{Op: AllReduce, Bytes: 64 << 20})
	if got := buf.String(); !strings.HasPrefix(got, "commbench: case 2/3: allreduce 64 MiB, ") || !strings.HasSuffix(got, " elapsed\n") {
		t.Errorf("progress line %q", got)
	}
	q := newProgress(&buf, 3, true)
	q.last = q.last.Add(-progressEvery)
	buf.Reset()
	q.step(0, Case{Op: AllReduce})
	if buf.Len() != 0 {
		t.Errorf("quiet progress printed %q", buf.String())
	}
}

// The whole comparison, with whichever peers this machine has; slow
// (Python imports torch), so not in -short.
func TestCompareEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mpirun and Python")
	}
	t.Setenv(helperEnv, "1") // the gocomm series runs this test binary as commbench
	for _, k := range []string{env.EnvRank, env.EnvWorldSize, env.EnvMasterAddr, env.EnvMasterPort} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	cfg, err := ParseCompareArgs([]string{"-n", "2", "--op", "allreduce,allgather@64,reducescatter@64,alltoall@64,sendrecv@64,pingpong@64,barrier",
		"-b", "8", "-e", "64", "-f", "8", "-w", "1", "-i", "3", "--runs", "1", "-c", "-q", "--timeout", "2m",
		// One variant per best-of series: every op's algorithm 4.
		"--mpi-algos", "allreduce=4 allgather=4 reducescatter=4 alltoall=4 barrier=4",
		"--series", strings.Join(AllSeries, ",")}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := Compare(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	t.Logf("comparison:\n%s", s)
	if !strings.Contains(s, "# check: 0 wrong elements") {
		t.Errorf("wrong elements:\n%s", s)
	}
	for _, ours := range []string{SeriesGocommTCP, SeriesGocommSHM} {
		if strings.Contains(s, ours+": ") {
			t.Errorf("the %s series failed:\n%s", ours, s)
		}
	}
	for _, peer := range []struct{ series, tool string }{{SeriesMPISHM, "mpicc"}, {SeriesMPISHMMT, "mpicc"}, {SeriesMPISHMBest, "mpicc"}, {"mpi-shm-k4", "mpicc"}, {SeriesGloo, "/usr/bin/python3"}} {
		if _, err := exec.LookPath(peer.tool); err == nil && strings.Contains(s, peer.series+": ") {
			t.Errorf("%s did not run although %s is here:\n%s", peer.series, peer.tool, s)
		}
	}
	if _, err := exec.LookPath("mpicc"); err == nil && !strings.Contains(s, "alg = K of coll_tuned_allreduce_algorithm: 4 ring") {
		t.Errorf("no best-of all-reduce by algorithm 4:\n%s", s)
	}
}
