package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/launch"
)

// trainInWorld trains on an in-process world of n ranks and returns each
// rank's result.
func trainInWorld(t *testing.T, n int, cfg config) []result {
	t.Helper()
	w, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := make([]result, n)
	errs := make([]error, n)
	var out bytes.Buffer // rank 0 alone writes
	var wg sync.WaitGroup
	for r, c := range w {
		wg.Go(func() {
			defer c.Close()
			res[r], errs[r] = train(ctx, c, cfg, &out)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", r, err, out.String())
		}
	}
	t.Logf("%d ranks:\n%s", n, out.String())
	return res
}

// Training learns, every rank ends identical, and a run is reproducible.
// The hidden layers are narrower than the default's to keep the race
// detector's run short; the code is the same.
func TestTrainLearnsAndRanksAgree(t *testing.T) {
	cfg := defaultConfig()
	cfg.epochs, cfg.samples, cfg.hidden = 3, 2048, 64
	a := trainInWorld(t, 4, cfg)
	for r, res := range a {
		if res.checksum != a[0].checksum {
			t.Errorf("rank %d checksum %016x, rank 0 %016x", r, res.checksum, a[0].checksum)
		}
	}
	// The classes overlap (spread): chance is 25% and a loss of ln 4 = 1.39.
	if a[0].accuracy < 0.75 || a[0].loss > 0.7 {
		t.Errorf("did not learn: test accuracy %.3f, loss %.3f", a[0].accuracy, a[0].loss)
	}
	if b := trainInWorld(t, 4, cfg); b[0].checksum != a[0].checksum {
		t.Errorf("not reproducible: %016x then %016x", a[0].checksum, b[0].checksum)
	}
	cfg.hidden = 0 // softmax regression
	if s := trainInWorld(t, 2, cfg); s[0].accuracy < 0.5 {
		t.Errorf("softmax regression: test accuracy %.3f", s[0].accuracy)
	}
}

// Every optimizer learns in process, and the ranks agree.
func TestTrainOptimizers(t *testing.T) {
	cfg := defaultConfig()
	cfg.epochs, cfg.samples, cfg.hidden, cfg.freezeStep = 2, 2048, 64, 10
	for _, o := range []optimizer{optimSGD, optimAdam, optimOnebitAdam} {
		cfg.optim, cfg.lr = o, 0.01 // Adam's default 1e-3 needs more steps than this
		if o == optimSGD {
			cfg.lr = 0 // its default, 0.05
		}
		res := trainInWorld(t, 2, cfg)
		if res[0].accuracy < 0.7 {
			t.Errorf("%s: test accuracy %.3f", o, res[0].accuracy)
		}
		if res[1].checksum != res[0].checksum {
			t.Errorf("%s: rank 1 ends with %016x, rank 0 with %016x", o, res[1].checksum, res[0].checksum)
		}
	}
}

// ZeRO stages 1 and 2 train as Adam does (the same updates up to the
// reductions' rounding): the same accuracy band and nearly the same loss,
// every rank identical, on 2 ranks and on 3 (uneven shares). Holding every
// Ready back until backward has finished (-overlap=false) changes when
// buckets start, not what they add: the same bits.
func TestTrainZero(t *testing.T) {
	cfg := defaultConfig()
	cfg.epochs, cfg.samples, cfg.hidden, cfg.optim, cfg.lr = 2, 2048, 64, optimAdam, 0.01
	cfg.bucketKB = 8 // several buckets even for this small model
	for _, n := range []int{2, 3} {
		cfg.zero = 0
		base := trainInWorld(t, n, cfg)
		for _, stage := range []int{1, 2} {
			cfg.zero = stage
			res := trainInWorld(t, n, cfg)
			for r := range res {
				if res[r].checksum != res[0].checksum {
					t.Errorf("%d ranks, -zero %d: rank %d ends with %016x, rank 0 with %016x", n, stage, r, res[r].checksum, res[0].checksum)
				}
			}
			if res[0].accuracy < 0.7 || math.Abs(res[0].accuracy-base[0].accuracy) > 0.02 || math.Abs(res[0].loss-base[0].loss) > 0.01*base[0].loss {
				t.Errorf("%d ranks, -zero %d: test accuracy %.4f, loss %.4f; -zero 0: %.4f, %.4f", n, stage, res[0].accuracy, res[0].loss, base[0].accuracy, base[0].loss)
			}
			if stage == 2 && n == 3 {
				cfg.overlap = false
				held := trainInWorld(t, n, cfg)
				cfg.overlap = true
				if held[0].checksum != res[0].checksum {
					t.Errorf("-zero 2 -overlap=false ends with %016x, overlapped %016x", held[0].checksum, res[0].checksum)
				}
			}
		}
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		change func(*config)
		want   string
	}{
		{func(c *config) { c.zero, c.optim = 3, optimAdam }, "-zero 3"},
		{func(c *config) { c.zero = 1 }, "-optim adam"},
		{func(c *config) { c.zero, c.optim, c.reducer = 2, optimAdam, false }, "-reducer=false"},
		{func(c *config) { c.bucketKB = 0 }, "-bucket-kb"},
		{func(c *config) { c.elastic, c.optim = true, optimAdam }, "-optim sgd only"},
		{func(c *config) { c.shrink, c.optim = true, optimAdam }, "-optim sgd only"},
	} {
		cfg := defaultConfig()
		tc.change(&cfg)
		if err := cfg.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error naming %s", cfg, err, tc.want)
		}
	}
	// -shrink is -elastic that waits for no replacement, and keeps the
	// Reducer (rebuilt over each new world).
	cfg := defaultConfig()
	cfg.shrink = true
	if err := cfg.check(); err != nil || !cfg.elastic || cfg.joinWait != 0 || !cfg.reducer {
		t.Errorf("-shrink: %v, elastic %v, join wait %v, reducer %v; want -elastic -join-wait 0 with the Reducer", err, cfg.elastic, cfg.joinWait, cfg.reducer)
	}
}

func TestOptimizerFlag(t *testing.T) {
	for in, want := range map[string]optimizer{"sgd": optimSGD, "Adam": optimAdam, "onebitadam": optimOnebitAdam, "onebit_adam": optimOnebitAdam, "1bitadam": optimOnebitAdam} {
		var o optimizer
		if err := o.Set(in); err != nil || o != want {
			t.Errorf("Set(%q) = %v, %q; want %q", in, err, o, want)
		}
	}
	var o optimizer
	if err := o.Set("lamb"); err == nil || !strings.Contains(err.Error(), "onebitadam") {
		t.Errorf("Set(lamb): %v", err)
	}
}

func TestTrainRejectsTinyShards(t *testing.T) {
	w, err := comm.NewLocalWorld(1, comm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w[0].Close()
	cfg := defaultConfig()
	cfg.samples = 16
	if _, err := train(context.Background(), w[0], cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "fewer than one batch") {
		t.Errorf("got %v", err)
	}
}

// ZeRO-2 in real processes, 3 ranks (uneven shares), over the default
// transport: the ranks end identical.
func TestTrainZeroProcesses(t *testing.T) {
	bin := buildTrain(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"-zero", "2", "-lr", "0.01"}, trainArgs...)
	err := launch.Run(ctx, launch.Config{NProcs: 3, Program: bin, Args: args, Env: testkit.LauncherFreeEnv(),
		Stdout: &out, Stderr: &out, Timeout: 80 * time.Second})
	if err != nil {
		t.Fatalf("-zero 2 on 3 ranks: %v\n%s", err, out.String())
	}
	checksumOf(t, "-zero 2 on 3 ranks", out.Bytes(), 3)
	if !bytes.Contains(out.Bytes(), []byte("ZeRO stage 2")) {
		t.Errorf("no ZeRO on the first line:\n%s", out.String())
	}
}

// The binary under every launcher. The flags keep each run short.
var trainArgs = []string{"-epochs", "2", "-samples", "4096", "-hidden", "128", "-timeout", "60s"}

// trainProgram is the program under test.
var trainProgram = testkit.Binary{Name: "train"}

func TestMain(m *testing.M) {
	code := m.Run()
	trainProgram.Remove()
	os.Exit(code)
}

// buildTrain builds this example once.
func buildTrain(t *testing.T) string {
	t.Helper()
	return trainProgram.Path(t)
}

var doneLine = regexp.MustCompile(`train: done: (\d+) ranks, .*parameter checksum ([0-9a-f]{16})`)

// checksumOf finds the final line of a run in its output.
func checksumOf(t *testing.T, what string, out []byte, ranks int) string {
	t.Helper()
	m := doneLine.FindAllSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("%s: want one final line, found %d:\n%s", what, len(m), out)
	}
	if n, _ := strconv.Atoi(string(m[0][1])); n != ranks {
		t.Fatalf("%s: ran on %d ranks, want %d:\n%s", what, n, ranks, out)
	}
	if !bytes.Contains(out, []byte("parameters identical on all "+strconv.Itoa(ranks)+" ranks")) {
		t.Fatalf("%s: no identical-parameters check:\n%s", what, out)
	}
	return string(m[0][2])
}

// runCmd runs a launcher command to completion within a minute.
func runCmd(t *testing.T, what string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = testkit.LauncherFreeEnv()
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	return out
}

// commrunChecksum runs the binary under the launch package (commrun's
// logic) on n ranks.
func commrunChecksum(t *testing.T, bin string, n int) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	err := launch.Run(ctx, launch.Config{NProcs: n, Program: bin, Args: trainArgs, Env: testkit.LauncherFreeEnv(),
		Stdout: &out, Stderr: &out, Timeout: 80 * time.Second})
	if err != nil {
		t.Fatalf("commrun -n %d: %v\n%s", n, err, out.String())
	}
	t.Logf("commrun -n %d: %v", n, time.Since(start).Round(time.Millisecond))
	return checksumOf(t, fmt.Sprintf("commrun -n %d", n), out.Bytes(), n)
}

// The unmodified binary: self-launched, under commrun, mpirun and torchrun,
// ends with the same parameters for the same world size.
func TestTrainUnderLaunchers(t *testing.T) {
	bin := buildTrain(t)
	want4 := commrunChecksum(t, bin, 4)
	want2 := commrunChecksum(t, bin, 2)
	if want2 == want4 {
		t.Logf("2 and 4 ranks end alike (%s)", want2)
	}

	t.Run("self-launch", func(t *testing.T) {
		out := runCmd(t, "train (Spawn, 4 ranks)", bin, trainArgs...)
		if !bytes.Contains(out, []byte("[0] train: done")) {
			t.Errorf("output not prefixed by rank:\n%s", out)
		}
		if got := checksumOf(t, "self-launch", out, 4); got != want4 {
			t.Errorf("self-launch checksum %s, commrun -n 4 %s", got, want4)
		}
	})

	t.Run("mpirun", func(t *testing.T) {
		mpirun, err := exec.LookPath("mpirun")
		if err != nil {
			t.Skip("mpirun (Open MPI) is not installed: apt-get install openmpi-bin")
		}
		args := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", "4", bin}, trainArgs...)
		out := runCmd(t, "mpirun -np 4", mpirun, args...)
		if got := checksumOf(t, "mpirun -np 4", out, 4); got != want4 {
			t.Errorf("mpirun checksum %s, commrun -n 4 %s", got, want4)
		}
	})

	t.Run("torchrun", func(t *testing.T) {
		torchrun, prefix := torchrunCommand(t)
		port := testkit.FreePort(t)
		args := append(prefix, "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
			"--master_port", strconv.Itoa(port), "--no_python", bin)
		args = append(args, trainArgs...)
		out := runCmd(t, "torchrun --nproc_per_node 2", torchrun, args...)
		if !bytes.Contains(out, []byte("[default0]:train: done")) {
			t.Errorf("rank 0's output is not where torchrun --tee puts it:\n%s", out)
		}
		if got := checksumOf(t, "torchrun", out, 2); got != want2 {
			t.Errorf("torchrun checksum %s, commrun -n 2 %s", got, want2)
		}
	})
}

// torchrunCommand finds torchrun, or python3 -m torch.distributed.run with
// a torch that imports; it skips the test when neither is there.
func torchrunCommand(t *testing.T) (string, []string) {
	if p, err := exec.LookPath("torchrun"); err == nil {
		return p, nil
	}
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		p, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		out, err := exec.Command(p, "-c", "import torch.distributed.run").CombinedOutput()
		if err == nil {
			return p, []string{"-m", "torch.distributed.run"}
		}
		if !bytes.Contains(out, []byte("ModuleNotFoundError")) {
			// torch is there but broken: a failure, not a reason to skip.
			t.Fatalf("%s -c 'import torch.distributed.run': %v\n%s", p, err, out)
		}
	}
	t.Skip("torchrun is not installed (nor a python3 with torch): apt-get install python3-torch")
	return "", nil
}

var (
	lossLine  = regexp.MustCompile(`train: done: \d+ ranks, \d+ epochs, loss ([0-9.]+),`)
	bytesLine = regexp.MustCompile(`train: bytes per step \(profiler\): ([a-z-]+) stage ([0-9]+) B`)
)

// lossAndBytes runs the binary on 4 ranks with args and returns its final
// training loss and bytes per step by stage, as it printed them.
func lossAndBytes(t *testing.T, bin string, args ...string) (float64, map[string]float64) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := launch.Run(ctx, launch.Config{NProcs: 4, Program: bin, Args: args, Env: testkit.LauncherFreeEnv(),
		Stdout: &out, Stderr: &out, Timeout: 4 * time.Minute})
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	m := lossLine.FindSubmatch(out.Bytes())
	if m == nil {
		t.Fatalf("%v: no final line:\n%s", args, out.String())
	}
	loss, _ := strconv.ParseFloat(string(m[1]), 64)
	stages := map[string]float64{}
	for _, b := range bytesLine.FindAllSubmatch(out.Bytes(), -1) {
		stages[string(b[1])], _ = strconv.ParseFloat(string(b[2]), 64)
	}
	t.Logf("%v: loss %.4f, bytes per step %v", args, loss, stages)
	return loss, stages
}

// The default model trained with Adam and with 1-bit Adam side by side:
// 1-bit Adam ends within 2% of Adam's loss, its warm-up sends what Adam
// sends, and its compression stage at least 20 times fewer bytes per step,
// as the comms logger counted them.
func TestOnebitAdamBesideAdam(t *testing.T) {
	bin := buildTrain(t)
	common := []string{"-timeout", "3m", "-freeze-step", "40", "-profile"}
	adamLoss, adam := lossAndBytes(t, bin, append([]string{"-optim", "adam"}, common...)...)
	oneLoss, one := lossAndBytes(t, bin, append([]string{"-optim", "onebitadam"}, common...)...)
	if math.Abs(oneLoss-adamLoss) > 0.02*adamLoss {
		t.Errorf("1-bit Adam's loss %.4f is not within 2%% of Adam's %.4f", oneLoss, adamLoss)
	}
	if adam["exact"] == 0 || one["warm-up"] == 0 || one["compression"] == 0 {
		t.Fatalf("stages missing: Adam %v, 1-bit Adam %v", adam, one)
	}
	if one["warm-up"] != adam["exact"] {
		t.Errorf("warm-up sends %.0f B per step, Adam %.0f B", one["warm-up"], adam["exact"])
	}
	if r := adam["exact"] / one["compression"]; r < 20 {
		t.Errorf("compression stage sends %.0f B per step, Adam %.0f B: %.1fx fewer, want >= 20x", one["compression"], adam["exact"], r)
	}
}
