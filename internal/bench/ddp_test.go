package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/internal/models"
	"github.com/gocomm/comm/internal/testkit"
)

func TestParseDDPArgs(t *testing.T) {
	cfg, err := ParseDDPArgs(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Models, models.Names) || !reflect.DeepEqual(cfg.Series, DDPSeries) || cfg.Ranks != 2 ||
		!reflect.DeepEqual(cfg.Modes, []string{ModePerTensor, ModeReducer, ModeFlat}) || cfg.Runs != 3 || cfg.ComputeKind != ComputeSpin {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = ParseDDPArgs([]string{"--model", "small40", "-n", "4", "--series", "gocomm-tcp", "--overlap", "--compute", "2", "--compute-kind", "sleep"}, &bytes.Buffer{})
	if err != nil || cfg.Models[0] != "small40" || cfg.Ranks != 4 || !cfg.Overlap || cfg.ComputeFactor != 2 || cfg.ComputeKind != ComputeSleep {
		t.Errorf("%+v, %v", cfg, err)
	}
	for _, args := range [][]string{
		{"--model", "vgg"}, {"--model", "resnet50,resnet50"}, {"--series", "nccl"}, {"--modes", "ring"},
		{"-n", "0"}, {"-i", "0"}, {"--runs", "0"}, {"--compute-kind", "gpu"}, {"--compute", "-1"},
		{"--transport", "inproc"}, {"--model", ""}, {"extra"},
	} {
		if _, err := ParseDDPArgs(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestModelByName(t *testing.T) {
	m, err := modelByName("small7")
	if err != nil || len(m.Tensors) != 7 || m.Name != "small7" {
		t.Errorf("small7: %s %d %v", m.Name, len(m.Tensors), err)
	}
	if m, err := modelByName("small1000"); err != nil || m.Name != models.NameSmall {
		t.Errorf("small1000: %v", err)
	}
	for _, bad := range []string{"small0", "smallx", "small"} {
		if _, err := modelByName(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestDDPRawRoundTrip(t *testing.T) {
	in := []DDPSample{
		{Mode: ModeFlat, Times: []float64{0.001, 0.002}, Loop: 0.0015, Wrong: 0},
		{Mode: ModeOverlap, Times: []float64{0.5}, Loop: 0.5, Wrong: -1, Compute: 0.25},
	}
	var buf bytes.Buffer
	if err := WriteDDPRaw(&buf, 4, "resnet50", in); err != nil {
		t.Fatal(err)
	}
	n, m, got, err := ParseDDPRaw(&buf)
	if err != nil || n != 4 || m != "resnet50" || len(got) != 2 {
		t.Fatalf("%d %s %+v %v", n, m, got, err)
	}
	for i := range in {
		if got[i].Mode != in[i].Mode || got[i].Wrong != in[i].Wrong || !close(got[i].Loop, in[i].Loop) ||
			!close(got[i].Compute, in[i].Compute) || len(got[i].Times) != len(in[i].Times) || !close(got[i].Times[0], in[i].Times[0]) {
			t.Errorf("sample %d: %+v, want %+v", i, got[i], in[i])
		}
	}
	for _, bad := range []string{"", "gocomm-bench-raw 1\n", ddpRawHeader + "\nranks x\n", ddpRawHeader + "\nmode flat 0 1\n",
		ddpRawHeader + "\nmode flat 0 1 0 -2\n", ddpRawHeader + "\nmode flat z 1 0 1\n", ddpRawHeader + "\ncase x\n"} {
		if _, _, _, err := ParseDDPRaw(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestAggregateDDP(t *testing.T) {
	m := models.ResNet50()
	gocomm := func(pt, red, flat, comp, ov float64) []DDPSample {
		return []DDPSample{
			{Mode: ModePerTensor, Loop: pt, Wrong: 0}, {Mode: ModeReducer, Loop: red, Wrong: 0}, {Mode: ModeFlat, Loop: flat, Wrong: 1},
			{Mode: ModeCompute, Loop: comp, Wrong: -1, Compute: comp}, {Mode: ModeOverlap, Loop: ov, Wrong: 0, Compute: comp},
		}
	}
	torch := func(ddp, plain float64) []DDPSample {
		return []DDPSample{{Mode: ModeTorchDDP, Loop: ddp, Wrong: -1}, {Mode: ModeTorchPlain, Loop: plain, Wrong: -1}, {Mode: ModeFlat, Loop: 5, Wrong: -1}}
	}
	runs := map[string][][]DDPSample{
		// Run 2 twice as slow: same-run ratios do not see it.
		SeriesGocommSHM: {gocomm(10, 2, 1.9, 2, 2.2), gocomm(20, 4, 3.8, 4, 4.4), nil},
		SeriesTorchGloo: {torch(9, 3), torch(18, 6), torch(12, 4)},
	}
	rep := AggregateDDP(m, 2, []string{SeriesGocommSHM, SeriesTorchGloo}, runs)
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	g, tg := rep.Rows[0], rep.Rows[1]
	if g.Runs != 2 || tg.Runs != 3 || g.Wrong != 2 || tg.Wrong != -1 {
		t.Errorf("runs %d %d wrong %d %d", g.Runs, tg.Runs, g.Wrong, tg.Wrong)
	}
	for k, want := range map[string]float64{ModeReducer: 3, ModeFlat: 2.85, keyExposed: 0.3} {
		if !close(g.Times[k], want) {
			t.Errorf("gocomm %s = %v, want %v", k, g.Times[k], want)
		}
	}
	for k, want := range map[string]float64{"reducer/flat": 2 / 1.9, "pertensor/reducer": 5, "ddp/reducer": 3, "exposed/flat": 0.2 / 1.9} {
		if !close(g.Ratios[k], want) {
			t.Errorf("gocomm %s = %v, want %v", k, g.Ratios[k], want)
		}
	}
	if !close(tg.Times[keyTorchDDP], 8) || !close(g.Planned, 4) {
		t.Errorf("torch ddp cost %v (want the median of 6, 12, 8), planned %v", tg.Times[keyTorchDDP], g.Planned)
	}
	var out bytes.Buffer
	WriteDDPReport(&out, rep, DDPConfig{Runs: 3, Warmup: 1, Iters: 2, Overlap: true, ComputeFactor: 1, ComputeKind: ComputeSpin})
	for _, want := range []string{
		"# resnet50: 161 tensors, 25557032 params", "reducer/flat 1.05x <= 1.15x met", "torch-ddp/reducer 3.00x >= 3x met",
		"exposed/flat 11% <= 25% met", "d/c 1.60x",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBackwardPlan(t *testing.T) {
	m := models.Model{Tensors: []models.Tensor{{Shape: []int{3}}, {Shape: []int{1}}, {Shape: []int{4}}}}
	got := backwardPlan(m, 8*time.Second)
	want := []time.Duration{8 * time.Second, 5 * time.Second, 4 * time.Second} // the last tensor's layer first
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// RunDDP on an in-process world: every mode's check step must give the
// average over the ranks.
func TestRunDDPChecks(t *testing.T) {
	const n = 3
	world := testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute}) })
	ctx := testkit.Context(t, time.Minute)
	modes := []string{ModePerTensor, ModeReducer, ModeFlat, ModeFlatShared}
	cfg := DDPRankConfig{Model: models.SmallTensors(12), Modes: modes, Warmup: 1, Iters: 2, Check: true,
		Overlap: true, ComputeFactor: 1, ComputeKind: ComputeSleep}
	res := make([][]DDPSample, n)
	testkit.NoErrors(t, testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
		var err error
		if res[r], err = RunDDP(ctx, c, cfg); err != nil {
			c.Abort(err)
		}
		return err
	}))
	want := len(modes) + 2 // compute and overlap
	if len(res[0]) != want || res[1] != nil {
		t.Fatalf("rank 0: %d samples, want %d; rank 1: %d", len(res[0]), want, len(res[1]))
	}
	for _, s := range res[0] {
		if s.Mode == ModeCompute {
			if s.Wrong != -1 {
				t.Errorf("compute checked: %+v", s)
			}
			continue
		}
		if s.Wrong != 0 || len(s.Times) != 2 || s.Loop <= 0 {
			t.Errorf("%s: %+v", s.Mode, s)
		}
	}
}

// commbench ddp as a user runs it, with the torch peer when this machine
// has it; slow (Python imports torch), so not in -short.
func TestDDPEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts ranks and Python with torch")
	}
	t.Setenv(helperEnv, "1") // the gocomm series runs this test binary as commbench
	for _, k := range []string{env.EnvRank, env.EnvWorldSize, env.EnvMasterAddr, env.EnvMasterPort} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	cfg, err := ParseDDPArgs([]string{"--model", "small20", "-n", "2", "-w", "1", "-i", "2", "--runs", "1", "--check", "-q", "--timeout", "2m",
		"--overlap", "--compute-kind", "sleep", "--modes", "pertensor,reducer,flat,flatshared"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := DDPCompare(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	t.Logf("report:\n%s", s)
	for _, series := range DDPSeries {
		row := rowOf(s, series)
		if series == SeriesTorchGloo && exec.Command("/usr/bin/python3", "-c", "import torch").Run() != nil {
			continue // no torch here (.ci/run installs python3-torch); where torch imports, its row must be there
		}
		if row == "" || !strings.HasSuffix(row, " 0") {
			t.Errorf("%s: no row, or wrong elements: %q", series, row)
		}
	}
}

// rowOf is the report line of a series.
func rowOf(report, series string) string {
	for _, l := range strings.Split(report, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == series {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
