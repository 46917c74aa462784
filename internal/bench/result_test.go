package bench

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

func TestStats(t *testing.T) {
	in := []float64{4, 1, 3, 2}
	st := Stats(in)
	if st != (Summary{Mean: 2.5, Min: 1, Median: 2.5, P99: 4, Max: 4}) {
		t.Errorf("Stats(%v) = %+v", in, st)
	}
	if !reflect.DeepEqual(in, []float64{4, 1, 3, 2}) {
		t.Errorf("Stats modified its input: %v", in)
	}
	if st := Stats([]float64{3, 1, 2}); st.Median != 2 || st.Mean != 2 {
		t.Errorf("odd count: %+v", st)
	}
	if st := Stats(nil); st != (Summary{}) {
		t.Errorf("Stats(nil) = %+v", st)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestSummarize(t *testing.T) {
	s := Sample{Case: Case{Op: AllReduce, Bytes: 1 << 20, Warmup: 5, Iters: 4}, Times: []float64{1e-3, 2e-3, 3e-3, 2e-3}, Wrong: 0}
	r := Summarize("x", 4, core.Float32, core.Sum, s)
	want := Result{
		Series: "x", Op: AllReduce, Bytes: 1 << 20, Count: 1 << 18, DType: "float32", RedOp: "sum", Root: -1,
		Ranks: 4, Warmup: 5, Iters: 4, TimeUS: 2000, MinUS: 1000, MedUS: 2000, P99US: 3000, MaxUS: 3000,
		AlgBW: float64(1<<20) / 2e-3 / 1e9, BusBW: float64(1<<20) / 2e-3 / 1e9 * 1.5, Wrong: 0,
	}
	if !approxResult(r, want) {
		t.Errorf("Summarize = %+v\nwant        %+v", r, want)
	}
	// Rooted ops show their root, non-reducing ops "none".
	r = Summarize("", 2, core.Int8, core.Max, Sample{Case: Case{Op: Broadcast, Bytes: 8, Root: 1}, Times: []float64{1e-6}, Wrong: -1})
	if r.Root != 1 || r.RedOp != "none" || r.Count != 8 || r.Wrong != -1 {
		t.Errorf("broadcast row = %+v", r)
	}
	r = Summarize("", 2, core.Int8, core.Max, Sample{Case: Case{Op: Reduce, Bytes: 8, Root: 1}, Times: []float64{1e-6}})
	if r.Root != 1 || r.RedOp != "max" {
		t.Errorf("reduce row = %+v", r)
	}
	// A ping-pong's time is one way: half the round trip.
	r = Summarize("", 2, core.Float32, core.Sum, Sample{Case: Case{Op: PingPong, Bytes: 1000}, Times: []float64{2e-6}})
	if r.TimeUS != 1 || math.Abs(r.AlgBW-1) > 1e-12 || math.Abs(r.BusBW-1) > 1e-12 {
		t.Errorf("pingpong row = %+v; want 1 us and 1 GB/s", r)
	}
	// A skipped case has no time.
	r = Summarize("", 2, core.Float32, core.Sum, Sample{Case: Case{Op: ReduceScatter, Bytes: 64}, Skip: "no", Wrong: -1})
	if r.Skip != "no" || r.TimeUS != 0 || r.BusBW != 0 {
		t.Errorf("skipped row = %+v", r)
	}
}

func approxResult(a, b Result) bool {
	close := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y)) }
	fa := []float64{a.TimeUS, a.MinUS, a.MedUS, a.MaxUS, a.AlgBW, a.BusBW}
	fb := []float64{b.TimeUS, b.MinUS, b.MedUS, b.MaxUS, b.AlgBW, b.BusBW}
	for i := range fa {
		if !close(fa[i], fb[i]) {
			return false
		}
	}
	a.TimeUS, a.MinUS, a.MedUS, a.MaxUS, a.AlgBW, a.BusBW = 0, 0, 0, 0, 0, 0
	b.TimeUS, b.MinUS, b.MedUS, b.MaxUS, b.AlgBW, b.BusBW = 0, 0, 0, 0, 0, 0
	return a == b
}

func TestRawRoundTrip(t *testing.T) {
	samples := []Sample{
		{Case: Case{Op: AllReduce, Bytes: 8, Warmup: 5, Iters: 3}, Times: []float64{1.5e-6, 2e-6, 123.456789e-6}, Loop: 40.5e-6, Wrong: 0},
		{Case: Case{Op: Broadcast, Bytes: 64 << 20, Warmup: 1, Iters: 1, Root: 1}, Times: []float64{0.25}, Wrong: -1},
		{Case: Case{Op: ReduceScatter, Bytes: 64 << 20}, Wrong: -1, Skip: "ProcessGroupGloo does not support\treduce_scatter"},
	}
	var buf bytes.Buffer
	if err := WriteRaw(&buf, 3, samples); err != nil {
		t.Fatal(err)
	}
	n, back, err := ParseRaw(&buf)
	if err != nil || n != 3 {
		t.Fatalf("ParseRaw = %d, %v", n, err)
	}
	if len(back) != len(samples) {
		t.Fatalf("%d samples back, want %d", len(back), len(samples))
	}
	samples[2].Skip = "ProcessGroupGloo does not support reduce_scatter" // whitespace folds
	for i := range samples {
		a, b := back[i], samples[i]
		if a.Case != b.Case || a.Wrong != b.Wrong || a.Skip != b.Skip || len(a.Times) != len(b.Times) || math.Abs(a.Loop-b.Loop) > 1e-12 {
			t.Errorf("sample %d = %+v, want %+v", i, a, b)
			continue
		}
		for j := range a.Times {
			if math.Abs(a.Times[j]-b.Times[j]) > 1e-12*b.Times[j] {
				t.Errorf("sample %d time %d = %g, want %g", i, j, a.Times[j], b.Times[j])
			}
		}
	}
}

// The reported time is the loop's, not the mean of the per-iteration
// maxima, which count a rank's wait for another twice when ranks run out
// of phase.
func TestSummarizeUsesTheLoopTime(t *testing.T) {
	s := Sample{Case: Case{Op: AllReduce, Bytes: 8}, Times: []float64{10e-6, 130e-6, 10e-6, 130e-6}, Loop: 75e-6, Wrong: -1}
	r := Summarize("x", 2, core.Float32, core.Sum, s)
	if r.TimeUS != 75 || r.MinUS != 10 || r.MaxUS != 130 {
		t.Errorf("time %v min %v max %v, want 75, 10, 130", r.TimeUS, r.MinUS, r.MaxUS)
	}
	s.Op, s.Loop = PingPong, 0
	if r := Summarize("x", 2, core.Float32, core.Sum, s); r.TimeUS != 35 {
		t.Errorf("ping-pong without a loop time: %v us, want half the mean round trip, 35", r.TimeUS)
	}
}

// The harnesses write what ParseRaw reads: lines as mpi_bench.c and
// gloo_bench.py print them.
func TestParseRawFromHarnesses(t *testing.T) {
	in := rawMagic + "\nranks 2\n" +
		"case allreduce 8 5 0 0 17.794 1.082 1.924\n" +
		"loop 2.5\n" +
		"case alltoall 4096 2 0 -1 532.483 433.797\n" +
		"skip reducescatter 4096 torch: ProcessGroupGloo does not support reduce_scatter\n" +
		"skip allreduce 8 MPI has no avg reduction\n"
	n, s, err := ParseRaw(strings.NewReader(in))
	if err != nil || n != 2 || len(s) != 4 {
		t.Fatalf("ParseRaw = %d, %d samples, %v", n, len(s), err)
	}
	if s[0].Iters != 3 || s[0].Warmup != 5 || s[0].Loop != 2.5e-6 || s[1].Loop != 0 || s[1].Wrong != -1 || s[2].Skip == "" || s[3].Skip != "MPI has no avg reduction" {
		t.Errorf("samples = %+v", s)
	}
}

func TestParseRawErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"nope\n", "line 1"},
		{rawMagic + "\n", "no ranks"},
		{rawMagic + "\nranks 0\n", "positive"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0\n", "want case"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0 0\n", "no times"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0 -2 1\n", "negative"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0 0 1 NaN\n", "time"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0 0 -1\n", "time"},
		{rawMagic + "\nranks 2\ncase nosuch 8 5 0 0 1\n", "unknown op"},
		{rawMagic + "\nranks 2\nskip allreduce\n", "want skip"},
		{rawMagic + "\nranks 2\nskip allreduce x why\n", "bad size"},
		{rawMagic + "\nranks 2\nhello\n", "unknown item"},
		{rawMagic + "\nranks 2\nloop 3\n", "right after its case"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0 0 1\nloop 3\nloop 4\n", "right after its case"},
		{rawMagic + "\nranks 2\ncase allreduce 8 5 0 0 1\nloop -3\n", "loop time"},
	}
	for _, tt := range tests {
		if _, _, err := ParseRaw(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRaw(%q) error = %v; want one containing %q", tt.in, err, tt.want)
		}
	}
}

func FuzzParseRaw(f *testing.F) {
	f.Add(rawMagic + "\nranks 2\ncase allreduce 8 5 0 0 17.794 1.082\nskip reducescatter 64 no\n")
	f.Fuzz(func(t *testing.T, s string) {
		n, samples, err := ParseRaw(strings.NewReader(s))
		if err != nil {
			return
		}
		if n < 1 {
			t.Fatalf("parsed %d ranks", n)
		}
		for _, x := range samples {
			if x.Skip == "" && len(x.Times) == 0 {
				t.Fatalf("a case without times: %+v", x)
			}
			for _, v := range x.Times {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("time %g", v)
				}
			}
		}
	})
}
