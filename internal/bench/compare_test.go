package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

func TestAggregate(t *testing.T) {
	plan := Plan{DType: core.Float32, RedOp: core.Sum, Cases: []Case{
		{Op: AllReduce, Bytes: 8, Iters: 2}, {Op: AllReduce, Bytes: 1 << 20, Iters: 2},
		{Op: ReduceScatter, Bytes: 1 << 20, Iters: 2}, {Op: PingPong, Bytes: 1000, Iters: 1},
	}}
	us := func(xs ...float64) []float64 {
		for i := range xs {
			xs[i] *= 1e-6
		}
		return xs
	}
	runs := [][]Sample{
		{
			{Case: plan.Cases[0], Times: us(1, 3), Wrong: 0}, // mean 2
			{Case: plan.Cases[1], Times: us(100, 100), Wrong: 1},
			{Case: plan.Cases[2], Skip: "unsupported", Wrong: -1},
			{Case: plan.Cases[3], Times: us(4), Wrong: -1},
		},
		{
			{Case: plan.Cases[0], Times: us(10, 10), Wrong: 0}, // mean 10
			{Case: plan.Cases[1], Times: us(300, 500), Wrong: 2},
			{Case: plan.Cases[3], Times: us(8), Wrong: -1},
		},
		{
			{Case: plan.Cases[0], Times: us(4, 4), Wrong: 0}, // mean 4
			{Case: plan.Cases[1], Times: us(200, 200), Wrong: 0},
			{Case: plan.Cases[3], Times: us(6), Wrong: -1},
		},
	}
	rs := Aggregate("s", 2, plan, runs)
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4: %+v", len(rs), rs)
	}
	r := rs[0]
	if r.Op != AllReduce || r.Bytes != 8 || r.Runs != 3 || !close(r.TimeUS, 4) || !close(r.MinUS, 1) || !close(r.MaxUS, 10) || !close(r.MedUS, 4) || r.Wrong != 0 {
		t.Errorf("8 B = %+v; want the median of the means 2, 10, 4", r)
	}
	if !close(r.P99US, 4) {
		t.Errorf("8 B p99 = %v; want 4, the median of the runs' p99s 3, 10, 4", r.P99US)
	}
	r = rs[1]
	if !close(r.TimeUS, 200) || r.Wrong != 3 || !close(r.AlgBW, float64(1<<20)/200e-6/1e9) || !close(r.BusBW, r.AlgBW) {
		t.Errorf("1 MiB = %+v", r)
	}
	if rs[2].Skip != "unsupported" || rs[2].TimeUS != 0 {
		t.Errorf("skipped case = %+v", rs[2])
	}
	if r := rs[3]; !close(r.TimeUS, 3) || r.Wrong != -1 { // a round trip of 6 us, median
		t.Errorf("pingpong = %+v; want 3 us one way", r)
	}
}

func close(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// fakeRunner writes a raw file whose every case takes us microseconds,
// scaled by the run's index, and records the order of the calls.
func fakeRunner(name string, ours bool, us float64, order *[]string, fail func(run int) error) Runner {
	run := 0
	return Runner{
		Name: name, Ours: ours,
		Run: func(ctx context.Context, planPath, rawPath string) error {
			run++
			*order = append(*order, name)
			if fail != nil {
				if err := fail(run); err != nil {
					return err
				}
			}
			f, err := os.Open(planPath)
			if err != nil {
				return err
			}
			defer f.Close()
			plan, err := ParsePlan(f)
			if err != nil {
				return err
			}
			var samples []Sample
			for _, c := range plan.Cases {
				if name == "gloo" && c.Op == ReduceScatter {
					samples = append(samples, Sample{Case: c, Skip: "ProcessGroupGloo does not support reduce_scatter", Wrong: -1})
					continue
				}
				ts := make([]float64, c.Iters)
				for i := range ts {
					ts[i] = us * float64(run) * 1e-6
				}
				samples = append(samples, Sample{Case: c, Times: ts, Wrong: map[bool]int64{true: 0, false: -1}[plan.Check]})
			}
			return writeFile(rawPath, func(w io.Writer) error { return WriteRaw(w, 2, samples) })
		},
	}
}

func TestCompareWith(t *testing.T) {
	specs, _ := ParseOpSpecs("allreduce,reducescatter@64")
	cfg := CompareConfig{
		Ranks: 2, DType: core.Float32, RedOp: core.Sum, Runs: 3, Check: true,
		Sweep: SweepConfig{Ops: specs, Min: 8, Max: 64, Factor: 8, Warmup: 1, Iters: 2},
		JSON:  t.TempDir() + "/c.json", CSV: t.TempDir() + "/c.csv", Plot: t.TempDir() + "/c.svg",
	}
	var order []string
	runners := []Runner{
		fakeRunner("gocomm-tcp", true, 10, &order, nil),
		{Name: "gocomm-shm", Ours: true, Setup: func(context.Context) error { return errors.New("cannot map the segment") }},
		fakeRunner("mpi-shm", false, 5, &order, nil),
		fakeRunner("gloo", false, 40, &order, nil),
		fakeRunner("mpi-tcp", false, 20, &order, func(run int) error {
			if run == 2 {
				return errors.New("mpirun: boom\nmore detail")
			}
			return nil
		}),
	}
	var out, errOut bytes.Buffer
	if err := CompareWith(context.Background(), cfg, t.TempDir(), runners, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	// Runs interleave with a rotating first series.
	wantOrder := "gocomm-tcp mpi-shm gloo mpi-tcp | mpi-shm gloo mpi-tcp gocomm-tcp | gloo mpi-tcp gocomm-tcp mpi-shm"
	gotOrder := strings.Join(order[:4], " ") + " | " + strings.Join(order[4:8], " ") + " | " + strings.Join(order[8:], " ")
	if gotOrder != wantOrder {
		t.Errorf("order = %s\nwant    %s", gotOrder, wantOrder)
	}
	s := out.String()
	for _, want := range []string{
		"# commbench compare: 2 ranks, float32, redop sum",
		"median over 3 interleaved runs",
		"# allreduce\n",
		// Every run multiplies the fake times by its index: medians are
		// 2x the base, and mpi-tcp's (runs 1 and 3) 2x too.
		"tcp/gloo", "tcp/mpi-tcp",
		"4.00x", "2.00x",
		"# reducescatter\n", "n/a",
		"allreduce headlines",
		"gocomm-tcp/gloo",
		"gocomm-shm: not run: cannot map the segment",
		"mpi-tcp: run 2 failed: mpirun: boom",
		"# check: 0 wrong elements",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("comparison lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "gocomm-tcp/mpi-shm") || strings.Contains(s, "0.50x") {
		t.Errorf("gocomm over TCP compared with Open MPI over shared memory:\n%s", s)
	}
	if strings.Contains(s, "more detail") {
		t.Errorf("a note spans lines:\n%s", s)
	}
	for _, p := range []string{cfg.JSON, cfg.CSV, cfg.Plot} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	f, _ := os.Open(cfg.JSON)
	defer f.Close()
	rep, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, r := range rep.Results {
		series[r.Series]++
		if r.Series == "mpi-tcp" && r.Skip == "" && r.Runs != 2 {
			t.Errorf("mpi-tcp result over %d runs, want 2", r.Runs)
		}
	}
	if fmt.Sprint(series) != "map[gloo:3 gocomm-tcp:3 mpi-shm:3 mpi-tcp:3]" {
		t.Errorf("results per series = %v", series)
	}
}

func TestCompareWithNothingToRun(t *testing.T) {
	specs, _ := ParseOpSpecs("allreduce")
	cfg := CompareConfig{Ranks: 2, DType: core.Float32, Runs: 1, Quiet: true, Sweep: SweepConfig{Ops: specs, Min: 8, Max: 8, Factor: 2, Iters: 1}}
	runners := []Runner{{Name: "x", Setup: func(context.Context) error { return errors.New("no compiler") }}}
	err := CompareWith(context.Background(), cfg, t.TempDir(), runners, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no compiler") {
		t.Errorf("error = %v", err)
	}
	var order []string
	runners = []Runner{fakeRunner("y", true, 1, &order, func(int) error { return errors.New("crash") })}
	var out bytes.Buffer
	err = CompareWith(context.Background(), cfg, t.TempDir(), runners, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(out.String(), "y: run 1 failed: crash") {
		t.Errorf("error = %v, output:\n%s", err, out.String())
	}
}

func TestQuantile(t *testing.T) {
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, tc := range []struct{ q, want float64 }{{0.99, 198}, {0.5, 100}, {1, 200}, {0, 1}} {
		if got := Quantile(xs, tc.q); got != tc.want {
			t.Errorf("Quantile(1..200, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Quantile([]float64{7}, 0.99); got != 7 {
		t.Errorf("Quantile of one = %v", got)
	}
	if !math.IsNaN(Quantile(nil, 0.99)) {
		t.Error("Quantile of none is not NaN")
	}
}

func TestRatioString(t *testing.T) {
	tests := map[float64]string{0.5: "0.50x", 1: "1.00x", 15.26: "15.3x", 250: "250x", 0.0015: "0.002x", 0.0042: "0.004x", 0: "-", math.Inf(1): "-", math.NaN(): "-"}
	for in, want := range tests {
		if got := ratioString(in); got != want {
			t.Errorf("ratioString(%g) = %q, want %q", in, got, want)
		}
	}
	if got := formatRatio(Result{TimeUS: 2}, Result{TimeUS: 6}); got != "3.00x" {
		t.Errorf("formatRatio(2 us, 6 us) = %q, want 3.00x (ours three times faster)", got)
	}
	if got := formatRatio(Result{TimeUS: 2}, Result{Skip: "x"}); got != "-" {
		t.Errorf("formatRatio against a skipped case = %q", got)
	}
}
