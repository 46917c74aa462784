package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
)

// The tests run this test binary as the ranks (the helper-process pattern):
// roleEnv names what a rank does.
const roleEnv = "LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) { testkit.Main(m, roleEnv, helper) }

func helper(role string) int {
	rank := os.Getenv("RANK")
	switch role {
	case "print":
		fmt.Printf("rank %s of %s local %s/%s group %s/%s master %s:%s agent=%q\n", rank, os.Getenv("WORLD_SIZE"),
			os.Getenv("LOCAL_RANK"), os.Getenv("LOCAL_WORLD_SIZE"), os.Getenv("GROUP_RANK"), os.Getenv("GROUP_WORLD_SIZE"),
			os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("TORCHELASTIC_USE_AGENT_STORE"))
		fmt.Fprintf(os.Stderr, "to stderr from %s\n", rank)
		fmt.Print("no newline at the end")
		return 0
	case "fail":
		if rank == "1" {
			fmt.Println("about to fail")
			time.Sleep(100 * time.Millisecond)
			return 3
		}
		fmt.Println("waiting")
		time.Sleep(time.Minute)
		return 0
	case "survive": // rank 1 fails; the others finish after it
		if rank == "1" {
			return 3
		}
		time.Sleep(500 * time.Millisecond)
		fmt.Println("survived")
		return 0
	case "fail-unless-joined": // rank 1 fails, its restart succeeds
		if os.Getenv("GOCOMM_JOIN") == "1" {
			fmt.Println("restarted as a newcomer, restart", os.Getenv("TORCHELASTIC_RESTART_COUNT"))
			return 0
		}
		if rank == "1" {
			return 3
		}
		time.Sleep(500 * time.Millisecond)
		fmt.Println("survived")
		return 0
	case "sleep": // stopped by SIGTERM (Go's default action)
		fmt.Println("sleeping")
		time.Sleep(time.Minute)
		return 0
	case "graceful": // handles the forwarded signal
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		select {
		case sig := <-ch:
			fmt.Println("got", sig)
			return 0
		case <-time.After(time.Minute):
			return 5
		}
	case "stubborn": // rank 0 fails once the others ignore SIGTERM
		// The ranks share their parent, the launcher: rank 1 marks that it
		// ignores SIGTERM in a file named after it, which rank 0 waits for
		// (a loaded machine may start rank 1 long after rank 0).
		ready := filepath.Join(os.TempDir(), fmt.Sprintf("gocomm-stubborn-%d", os.Getppid()))
		if rank == "0" {
			for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
			}
			os.Remove(ready)
			return 1
		}
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		os.WriteFile(ready, nil, 0o600)
		time.Sleep(time.Minute)
		return 0
	case "spawn":
		parent, err := Spawn(context.Background(), 3)
		if parent {
			fmt.Printf("parent: done, err=%v\n", err)
			if err != nil {
				return 1
			}
			return 0
		}
		fmt.Printf("child rank %s of %s\n", rank, os.Getenv("WORLD_SIZE"))
		if os.Getenv("SPAWN_FAIL_RANK") == rank {
			return 4
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 99
}

func helperConfig(role string, n int, out *testkit.LockedBuffer) Config {
	return Config{
		NProcs:    n,
		Program:   os.Args[0],
		Args:      []string{"-test.run=^$"},
		Env:       testkit.LauncherFreeEnv(roleEnv+"="+role, "TORCHELASTIC_USE_AGENT_STORE=True"),
		Stdout:    out,
		Stderr:    out,
		KillGrace: 2 * time.Second,
		Timeout:   time.Minute,
	}
}

func runJob(t *testing.T, cfg Config) (*JobError, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := Run(ctx, cfg)
	d := time.Since(start)
	if err == nil {
		return nil, d
	}
	var je *JobError
	if !errors.As(err, &je) {
		t.Fatalf("Run: %v (not a *JobError)", err)
	}
	return je, d
}

func TestRunSetsTheContractAndPrefixesOutput(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("print", 3, &out)
	cfg.MasterPort = 4321
	if je, _ := runJob(t, cfg); je != nil {
		t.Fatalf("job failed: %v\n%s", je, out.String())
	}
	got := out.String()
	for r := range 3 {
		// The inherited TORCHELASTIC_USE_AGENT_STORE must not reach the ranks.
		for _, want := range []string{
			fmt.Sprintf("[%d] rank %d of 3 local %d/3 group 0/1 master 127.0.0.1:4321 agent=\"\"\n", r, r, r),
			fmt.Sprintf("[%d] to stderr from %d\n", r, r),
			fmt.Sprintf("[%d] no newline at the end\n", r),
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !strings.HasPrefix(line, "[") {
			t.Errorf("line without a rank prefix: %q", line)
		}
	}
}

func TestRunPicksAFreePortOnOneHost(t *testing.T) {
	var out testkit.LockedBuffer
	if je, _ := runJob(t, helperConfig("print", 1, &out)); je != nil {
		t.Fatal(je)
	}
	if strings.Contains(out.String(), "master 127.0.0.1:0 ") || !strings.Contains(out.String(), "master 127.0.0.1:") {
		t.Errorf("no port chosen: %s", out.String())
	}
}

func TestRunOneNodeOfSeveral(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("print", 2, &out)
	cfg.NNodes, cfg.NodeRank, cfg.MasterAddr = 3, 1, "node0.example"
	if je, _ := runJob(t, cfg); je != nil {
		t.Fatal(je)
	}
	for _, want := range []string{
		"[2] rank 2 of 6 local 0/2 group 1/3 master node0.example:29500",
		"[3] rank 3 of 6 local 1/2 group 1/3 master node0.example:29500",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunUnevenNodes: hosts that run different numbers of ranks (-n 2,1,2)
// number their ranks after the hosts before them.
func TestRunUnevenNodes(t *testing.T) {
	for _, tt := range []struct {
		node int
		want []string
	}{
		{0, []string{"[0] rank 0 of 5 local 0/2 group 0/3", "[1] rank 1 of 5 local 1/2 group 0/3"}},
		{1, []string{"[2] rank 2 of 5 local 0/1 group 1/3"}},
		{2, []string{"[3] rank 3 of 5 local 0/2 group 2/3", "[4] rank 4 of 5 local 1/2 group 2/3"}},
	} {
		var out testkit.LockedBuffer
		cfg := helperConfig("print", 0, &out)
		cfg.NProcsPerNode, cfg.NodeRank, cfg.MasterAddr = []int{2, 1, 2}, tt.node, "node0.example"
		if je, _ := runJob(t, cfg); je != nil {
			t.Fatal(je)
		}
		for _, want := range tt.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("node %d: output lacks %q:\n%s", tt.node, want, out.String())
			}
		}
	}
}

func TestRunStopsTheOthersWhenOneFails(t *testing.T) {
	var out testkit.LockedBuffer
	je, d := runJob(t, helperConfig("fail", 3, &out))
	if je == nil {
		t.Fatalf("job succeeded:\n%s", out.String())
	}
	if d > 10*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if je.First == nil || je.First.Rank != 1 || je.First.Code != 3 || je.ExitCode() != 3 {
		t.Fatalf("first failure %+v, exit code %d; want rank 1, status 3", je.First, je.ExitCode())
	}
	for _, r := range []int{0, 2} {
		if ex := je.Ranks[r]; !ex.Stopped || ex.Signal == nil {
			t.Errorf("rank %d was not stopped by a signal: %+v", r, ex)
		}
	}
	msg := je.Error()
	for _, want := range []string{"commrun: rank 1 failed first", "exit status 3", "last line of rank 1:", "[1] about to fail",
		"rank 0: killed by signal 15 (terminated) (stopped by commrun)", "rank 2: killed by signal 15"} {
		if !strings.Contains(msg, want) {
			t.Errorf("summary lacks %q:\n%s", want, msg)
		}
	}
}

// With KeepGoing the others run to their end after rank 1 fails, and the
// job still fails naming rank 1.
func TestRunKeepGoing(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("survive", 3, &out)
	cfg.KeepGoing = true
	je, _ := runJob(t, cfg)
	if je == nil || je.First == nil || je.First.Rank != 1 || !je.KeptGoing || je.ExitCode() != 3 {
		t.Fatalf("job error %+v:\n%s", je, out.String())
	}
	for _, r := range []int{0, 2} {
		if ex := je.Ranks[r]; ex.Failed() || ex.Stopped {
			t.Errorf("rank %d did not run to its end: %+v", r, ex)
		}
	}
	if n := strings.Count(out.String(), "survived"); n != 2 {
		t.Errorf("%d ranks survived, want 2:\n%s", n, out.String())
	}
	if !strings.Contains(je.Error(), "left to run on (-keep-going)") {
		t.Errorf("summary: %s", je.Error())
	}
}

// Elastic: a failed rank is started again as a newcomer (GOCOMM_JOIN=1),
// and the job succeeds.
func TestRunElasticRestarts(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("fail-unless-joined", 3, &out)
	cfg.Elastic = &Elastic{Min: 2, Max: 3, MaxRestarts: 1}
	if je, _ := runJob(t, cfg); je != nil {
		t.Fatalf("job error %v:\n%s", je, out.String())
	}
	for _, want := range []string{"commrun: rank 1 failed (exit status 3); restarting it (1 of 1 restarts)",
		"[1] restarted as a newcomer, restart 1", "[0] survived", "[2] survived"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Elastic: once no restart is left, the job runs on while MIN ranks
// remain, and fails when fewer do.
func TestRunElasticMin(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("survive", 3, &out)
	cfg.Elastic = &Elastic{Min: 2, Max: 3}
	if je, _ := runJob(t, cfg); je != nil {
		t.Fatalf("2 of MIN 2 ranks left: job error %v:\n%s", je, out.String())
	}
	if want := "rank 1 failed (exit status 3) and no restart is left; 2 ranks run on (at least 2 needed)"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}

	out = testkit.LockedBuffer{}
	cfg = helperConfig("survive", 3, &out)
	cfg.Elastic = &Elastic{Min: 3, Max: 3, MaxRestarts: 1}
	je, _ := runJob(t, cfg)
	if je == nil || je.First == nil || je.First.Rank != 1 || je.ExitCode() != 3 {
		t.Fatalf("2 of MIN 3 ranks left: job error %v:\n%s", je, out.String())
	}
	if !strings.Contains(out.String(), "restarting it (1 of 1 restarts)") {
		t.Errorf("rank 1 was not restarted once first:\n%s", out.String())
	}

	for _, el := range []Elastic{{Min: 0, Max: 3}, {Min: 4, Max: 4}, {Min: 1, Max: 2}, {Min: 1, Max: 3, MaxRestarts: -1}} {
		cfg := helperConfig("survive", 3, &out)
		cfg.Elastic = &el
		if err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Elastic %+v with 3 ranks: %v, want ErrConfig", el, err)
		}
	}
}

func TestRunTimeout(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("sleep", 2, &out)
	// Long enough for the ranks to start and print under -race on a busy
	// machine, so that the summary has their last lines to show.
	cfg.Timeout = 3 * time.Second
	je, d := runJob(t, cfg)
	if je == nil || !je.TimedOut || je.ExitCode() != 124 {
		t.Fatalf("got %v, want a timeout (exit 124)", je)
	}
	if d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if msg := je.Error(); !strings.Contains(msg, "timed out after 3s") || !strings.Contains(msg, "last line: sleeping") {
		t.Errorf("summary: %s", msg)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("graceful", 3, &out)
	sigs := make(chan os.Signal, 1)
	cfg.Signals = sigs
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(out.String(), "ready") < 3 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		sigs <- syscall.SIGINT
	}()
	je, _ := runJob(t, cfg)
	if je == nil || je.Signal != syscall.SIGINT || je.ExitCode() != 130 {
		t.Fatalf("got %v, want an interrupted job (exit 130)", je)
	}
	for r := range 3 {
		if want := fmt.Sprintf("[%d] got interrupt", r); !strings.Contains(out.String(), want) {
			t.Errorf("rank %d did not get SIGINT:\n%s", r, out.String())
		}
		if je.Ranks[r].Failed() {
			t.Errorf("rank %d: %s", r, je.Ranks[r].Status())
		}
	}
	if !strings.Contains(je.Error(), "interrupted by interrupt") {
		t.Errorf("summary: %s", je.Error())
	}
}

func TestRunKillsRanksThatIgnoreSIGTERM(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("stubborn", 2, &out)
	cfg.KillGrace = 300 * time.Millisecond
	je, d := runJob(t, cfg)
	if je == nil || je.First == nil || je.First.Rank != 0 {
		t.Fatalf("got %v", je)
	}
	if ex := je.Ranks[1]; ex.Signal != syscall.SIGKILL || !ex.Stopped {
		t.Errorf("rank 1: %s, want killed by SIGKILL", ex.Status())
	}
	if d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestRunProgramNotFound(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("print", 2, &out)
	cfg.Program = "/nonexistent/program"
	je, _ := runJob(t, cfg)
	if je == nil || je.First == nil || je.First.PID != 0 || !strings.Contains(je.Error(), "not started") {
		t.Fatalf("got %v", je)
	}
}

func TestRunContextCanceled(t *testing.T) {
	var out testkit.LockedBuffer
	cfg := helperConfig("sleep", 1, &out)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := Run(ctx, cfg)
	var je *JobError
	if !errors.As(err, &je) || !errors.Is(je.Canceled, context.DeadlineExceeded) || je.ExitCode() != 1 {
		t.Fatalf("got %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Program: "x"}, "0 ranks per node (-n): want at least 1"},
		{Config{NProcs: 1}, "no program to run"},
		{Config{NProcs: 1, Program: "x", NNodes: -1}, "-1 nodes"},
		{Config{NProcs: 1, Program: "x", NNodes: 2, NodeRank: 2, MasterAddr: "h"}, "node rank 2 (--node-rank) out of range for 2 nodes"},
		{Config{NProcs: 1, Program: "x", NNodes: 2}, "--master-addr is required with --nnodes 2"},
		{Config{NProcs: 1, Program: "x", MasterPort: 70000}, "master port 70000 (--master-port) is not a TCP port"},
		{Config{NProcs: 1, Program: "x", Timeout: -time.Second}, "timeout -1s"},
		{Config{NProcsPerNode: []int{2, 1}, Program: "x", NNodes: 3, MasterAddr: "h"}, "-n lists the ranks of 2 hosts but --nnodes is 3"},
		{Config{NProcsPerNode: []int{2, 0}, Program: "x", MasterAddr: "h"}, "host 1 has 0 ranks"},
	} {
		err := Run(context.Background(), tt.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(fmt.Sprint(err), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestMainCommandLine(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		role   string
		status int
		want   string
	}{
		{"no program", []string{"-n", "2"}, "", 2, "no program to run"},
		{"no -n", []string{"--", "x"}, "", 2, "want at least 1"},
		{"unknown flag", []string{"--frobnicate"}, "", 2, "flag provided but not defined"},
		{"help", []string{"-h"}, "", 0, "usage: commrun -n N"},
		{"uneven hosts", []string{"-n", "1,3", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", "4445", os.Args[0], "-test.run=^$"}, "print", 0, "[3] rank 3 of 4 local 2/3 group 1/2"},
		{"bad -n", []string{"-n", "2,x", "--", "x"}, "", 2, "want a number of ranks, or one per host"},
		{"success", []string{"-n", "2", "--", os.Args[0], "-test.run=^$"}, "print", 0, "[1] rank 1 of 2"},
		{"torchrun spelling", []string{"--nproc_per_node", "2", "--master_port", "4444", os.Args[0], "-test.run=^$"}, "print", 0, "master 127.0.0.1:4444"},
		{"failure", []string{"-n", "3", "--kill-grace", "1s", "--tail", "1", "--", os.Args[0], "-test.run=^$"}, "fail", 3, "last line of rank 1:\n    [1] about to fail"},
		{"timeout", []string{"-n", "1", "--timeout", "200ms", "--", os.Args[0], "-test.run=^$"}, "sleep", 124, "timed out after 200ms"},
		{"keep going", []string{"-n", "3", "-keep-going", "--", os.Args[0], "-test.run=^$"}, "survive", 3, "left to run on (-keep-going)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(roleEnv, tt.role)
			var out testkit.LockedBuffer
			status := Main(context.Background(), tt.args, &out, &out, nil)
			if status != tt.status || !strings.Contains(out.String(), tt.want) {
				t.Errorf("status %d, want %d; output lacks %q:\n%s", status, tt.status, tt.want, out.String())
			}
		})
	}
}

func TestLaunched(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"HOME=/root", "SLURM_PROCID=0", "SLURM_NTASKS=4"}, false}, // an sbatch script
		{[]string{"RANK=0", "WORLD_SIZE=1"}, true},
		{[]string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1"}, true},
		{[]string{"PMI_RANK=0", "PMI_SIZE=1", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=1"}, true},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0", "SLURM_LOCALID=0", "SLURM_STEP_TASKS_PER_NODE=1"}, true},
		{[]string{"RANK=0"}, true}, // incomplete: Init will say what is missing
	} {
		if got := Launched(envLookup(tt.env)); got != tt.want {
			t.Errorf("%v: Launched = %v, want %v", tt.env, got, tt.want)
		}
	}
}

func TestSpawn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = testkit.LauncherFreeEnv(roleEnv + "=spawn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"[0] child rank 0 of 3", "[1] child rank 1 of 3", "[2] child rank 2 of 3", "parent: done, err=<nil>"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(string(out), "parent:") != 1 {
		t.Errorf("the children spawned again:\n%s", out)
	}

	// A failing child fails the parent, naming the rank.
	cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = testkit.LauncherFreeEnv(roleEnv+"=spawn", "SPAWN_FAIL_RANK=2")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "rank 2 failed first") || !strings.Contains(string(out), "exit status 4") {
		t.Errorf("err %v, output:\n%s", err, out)
	}
}

func TestLineWriter(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	tl := &tail{n: 2}
	w := newLineWriter(7, &syncWriter{mu: &mu, w: &buf}, tl)
	w.Write([]byte("a\r\nb"))
	w.Write([]byte("c\n\nd"))
	w.Write(bytes.Repeat([]byte("x"), maxLine+10))
	w.flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 5 || lines[0] != "[7] a\r" || lines[1] != "[7] bc" || lines[2] != "[7] " ||
		lines[3] != "[7] d"+strings.Repeat("x", maxLine-1) || lines[4] != "[7] "+strings.Repeat("x", 11) {
		t.Errorf("got %d lines: %.80q", len(lines), lines)
	}
	if got := tl.get(); len(got) != 2 || got[1] != strings.Repeat("x", 11) {
		t.Errorf("tail %.40q", got)
	}
}

// TestRankEnvBind checks GOCOMM_BIND in the ranks' environment: auto where
// the environment has none, the environment's own value otherwise, and
// Config.Bind (commrun -bind-to) over both.
func TestRankEnvBind(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		bind string
		want string
	}{
		{"default", []string{"PATH=/bin"}, "", "auto"},
		{"environment", []string{"GOCOMM_BIND=none", "PATH=/bin"}, "", "none"},
		{"flag", []string{"GOCOMM_BIND=0-1"}, "none", "none"},
		{"flag list", nil, "2-3", "2-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{NProcs: 2, NNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 1, Env: tc.env, Bind: tc.bind}
			var got []string
			for _, kv := range cfg.rankEnv(1) {
				if v, ok := strings.CutPrefix(kv, "GOCOMM_BIND="); ok {
					got = append(got, v)
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("GOCOMM_BIND values %q, want exactly %q", got, tc.want)
			}
		})
	}
}

// TestRankEnvRunID: every local rank gets one TORCHELASTIC_RUN_ID, the
// caller's when it set one, else (on one host) the launcher's, and none
// on several hosts without the caller's (each host's commrun would make
// up a different one).
func TestRankEnvRunID(t *testing.T) {
	runIDs := func(cfg Config) []string {
		var ids []string
		for l := range cfg.NProcs {
			for _, kv := range cfg.rankEnv(l) {
				if v, ok := strings.CutPrefix(kv, "TORCHELASTIC_RUN_ID="); ok {
					ids = append(ids, v)
				}
			}
		}
		return ids
	}
	one := Config{NProcs: 3, NNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 1234, Env: []string{"PATH=/bin"}}
	if ids := runIDs(one); len(ids) != 3 || ids[0] == "" || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Errorf("one host: run ids %q, want one each, all equal", ids)
	}
	given := one
	given.Env = []string{"TORCHELASTIC_RUN_ID=job7"}
	if ids := runIDs(given); len(ids) != 3 || ids[0] != "job7" || ids[2] != "job7" {
		t.Errorf("caller's run id: %q, want job7 each", ids)
	}
	hosts := Config{NProcs: 2, NNodes: 2, MasterAddr: "h0", MasterPort: 1234, Env: []string{"PATH=/bin"}}
	if ids := runIDs(hosts); len(ids) != 0 {
		t.Errorf("several hosts: run ids %q, want none", ids)
	}
}
