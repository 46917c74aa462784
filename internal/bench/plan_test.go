package bench

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

func sweepOf(ops string, min, max int64) SweepConfig {
	specs, err := ParseOpSpecs(ops)
	if err != nil {
		panic(err)
	}
	return SweepConfig{Ops: specs, Min: min, Max: max, Factor: 2, Warmup: 5, Iters: 20}
}

func TestBuildPlan(t *testing.T) {
	p, err := BuildPlan(sweepOf("allreduce,allgather,broadcast@1K,barrier", 4, 64), core.Float32, core.Sum, true, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Cases {
		got = append(got, c.Op.String()+"/"+FormatSize(c.Bytes))
	}
	want := []string{
		// allreduce: every size holding one float32.
		"allreduce/4", "allreduce/8", "allreduce/16", "allreduce/32", "allreduce/64",
		// allgather over 4 ranks: 4 and 8 bytes cannot hold a block each.
		"allgather/16", "allgather/32", "allgather/64",
		"broadcast/1K",
		"barrier/0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cases = %v\nwant    %v", got, want)
	}
	if !p.Check || p.DType != core.Float32 || p.RedOp != core.Sum {
		t.Errorf("plan header = %v %v %v", p.DType, p.RedOp, p.Check)
	}
	if p.MaxBytes() != 1024 {
		t.Errorf("MaxBytes = %d, want 1024", p.MaxBytes())
	}
}

func TestBuildPlanRoundsAndMerges(t *testing.T) {
	// Over 3 ranks of float64, 48, 56 and 64 bytes (6, 7 and 8 elements)
	// all round down to 3 blocks of 2 elements: one case of 48 bytes.
	sc := SweepConfig{Ops: []OpSpec{{Op: AllToAll}}, Min: 48, Max: 64, Factor: 1, Step: 8, Warmup: 1, Iters: 1}
	p, err := BuildPlan(sc, core.Float64, core.Sum, false, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Cases) != 1 || p.Cases[0].Bytes != 48 {
		t.Errorf("cases = %+v, want one of 48 bytes", p.Cases)
	}
}

func TestBuildPlanRoot(t *testing.T) {
	sc := sweepOf("allreduce,reduce,broadcast", 8, 8)
	sc.Root = 2
	p, err := BuildPlan(sc, core.Int32, core.Max, false, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Cases {
		if want := map[bool]int{true: 2, false: 0}[c.Op.Rooted()]; c.Root != want {
			t.Errorf("%v root = %d, want %d", c.Op, c.Root, want)
		}
	}
}

func TestBudgeted(t *testing.T) {
	tests := []struct {
		warmup, iters int
		size, budget  int64
		ww, wi        int
	}{
		{5, 20, 64 << 20, 0, 5, 20},         // no budget
		{5, 20, 8, 1 << 30, 5, 20},          // small sizes keep everything
		{5, 50, 64 << 20, 1 << 30, 4, 16},   // 16 iterations fit, a quarter of them warm up
		{5, 50, 256 << 20, 1 << 30, 1, 5},   // never below 5 iterations and 1 warm-up
		{5, 3, 256 << 20, 1 << 30, 1, 3},    // nor above what was asked
		{0, 50, 64 << 20, 1 << 30, 0, 16},   // no warm-up stays none
		{5, 50, 1 << 30, 64 << 20, 1, 5},    // budget below the size
		{10, 100, 1 << 20, 32 << 20, 8, 32}, // warm-ups capped at a quarter
		{10, 100, 1 << 20, 512 << 20, 10, 100},
	}
	for _, tt := range tests {
		w, i := budgeted(tt.warmup, tt.iters, tt.size, tt.budget)
		if w != tt.ww || i != tt.wi {
			t.Errorf("budgeted(%d, %d, %d, %d) = %d, %d; want %d, %d", tt.warmup, tt.iters, tt.size, tt.budget, w, i, tt.ww, tt.wi)
		}
	}
}

func TestBuildPlanErrors(t *testing.T) {
	ok := sweepOf("allreduce", 8, 64)
	tests := []struct {
		name string
		sc   SweepConfig
		dt   core.DType
		op   core.Op
		n    int
		want string
	}{
		{"bad type", ok, core.Byte, core.Sum, 2, "cannot be benchmarked"},
		{"no ranks", ok, core.Float32, core.Sum, 0, "ranks"},
		{"bitwise on floats", ok, core.Float32, core.BAnd, 2, "cannot reduce"},
		{"pingpong alone", sweepOf("pingpong", 8, 8), core.Float32, core.Sum, 1, "2 ranks"},
		{"sendrecv alone", sweepOf("sendrecv", 8, 8), core.Float32, core.Sum, 1, "2 ranks"},
		{"root", func() SweepConfig { s := ok; s.Root = 2; return s }(), core.Float32, core.Sum, 2, "root"},
		{"iters", func() SweepConfig { s := ok; s.Iters = 0; return s }(), core.Float32, core.Sum, 2, "-i"},
		{"warmup", func() SweepConfig { s := ok; s.Warmup = -1; return s }(), core.Float32, core.Sum, 2, "-w"},
		{"nothing fits", sweepOf("alltoall", 4, 4), core.Float32, core.Sum, 2, "no case"},
		{"bad sweep", sweepOf("allreduce", 64, 8), core.Float32, core.Sum, 2, "below"},
	}
	for _, tt := range tests {
		if _, err := BuildPlan(tt.sc, tt.dt, tt.op, false, tt.n); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v; want one containing %q", tt.name, err, tt.want)
		}
	}
	// Bitwise ops are fine on integers, and on ops that do not reduce.
	if _, err := BuildPlan(sweepOf("allreduce,broadcast", 8, 8), core.Int32, core.BXor, false, 2); err != nil {
		t.Errorf("bxor on int32: %v", err)
	}
	if _, err := BuildPlan(sweepOf("broadcast", 8, 8), core.Float32, core.BXor, false, 2); err != nil {
		t.Errorf("bxor on a broadcast: %v", err)
	}
}

func TestPlanTextRoundTrip(t *testing.T) {
	sc := sweepOf("allreduce,reduce@1K,pingpong@8,barrier", 8, 1<<20)
	sc.Root = 1
	sc.Budget = 1 << 20
	for _, dt := range []core.DType{core.Float32, core.BFloat16, core.Uint64} {
		p, err := BuildPlan(sc, dt, core.Max, true, 3)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WritePlan(&buf, p); err != nil {
			t.Fatal(err)
		}
		back, err := ParsePlan(&buf)
		if err != nil {
			t.Fatalf("%v: ParsePlan: %v", dt, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Errorf("%v: round trip = %+v\nwant %+v", dt, back, p)
		}
	}
}

func TestParsePlanErrors(t *testing.T) {
	head := planMagic + "\ndtype float32\nredop sum\n"
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"gocomm-bench-plan 2\n", "line 1"},
		{planMagic + "\nredop sum\n", "required"},
		{planMagic + "\ndtype float99\nredop sum\n", "unknown type"},
		{planMagic + "\ndtype float32\nredop mean\n", "unknown reduction"},
		{head + "check yes\n", "check"},
		{head + "case allreduce 8 5 20\n", "want case"},
		{head + "case allreduce 8 5 0 0\n", "iters"},
		{head + "case allreduce -8 5 1 0\n", ">= 0"},
		{head + "case nosuch 8 5 1 0\n", "unknown op"},
		{head + "case allreduce 8 x 1 0\n", "not an integer"},
		{head + "frobnicate\n", "unknown item"},
	}
	for _, tt := range tests {
		if _, err := ParsePlan(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePlan(%q) error = %v; want one containing %q", tt.in, err, tt.want)
		}
	}
	p, err := ParsePlan(strings.NewReader(head + "\n# a comment\ncase barrier 0 1 2 0\n"))
	if err != nil || len(p.Cases) != 1 {
		t.Errorf("comments and blank lines: %+v, %v", p, err)
	}
}

func FuzzParsePlan(f *testing.F) {
	f.Add(planMagic + "\ndtype float32\nredop sum\ncheck 1\ncase allreduce 8 5 20 0\n")
	f.Add(planMagic + "\ndtype int8\nredop bxor\ncase barrier 0 0 1 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlan(strings.NewReader(s))
		if err != nil {
			return
		}
		// What parses writes back and parses to the same plan.
		var buf bytes.Buffer
		if err := WritePlan(&buf, p); err != nil {
			t.Fatal(err)
		}
		back, err := ParsePlan(&buf)
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", s, back, err, p)
		}
	})
}

func TestParseDTypeAndRedOp(t *testing.T) {
	for d := core.Int8; d < core.Byte; d++ {
		if got, err := ParseDType(d.String()); err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d, got, err)
		}
	}
	for in, want := range map[string]core.DType{"float": core.Float32, "double": core.Float64, "half": core.Float16, "bf16": core.BFloat16, "FP32": core.Float32} {
		if got, err := ParseDType(in); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseDType("byte"); err == nil {
		t.Error("ParseDType(byte) succeeded; bytes cannot be benchmarked")
	}
	for op := core.Sum; op <= core.Avg; op++ {
		if got, err := ParseRedOp(RedOpName(op)); err != nil || got != op {
			t.Errorf("ParseRedOp(%q) = %v, %v", RedOpName(op), got, err)
		}
	}
	if _, err := ParseRedOp("mean"); err == nil {
		t.Error("ParseRedOp(mean) succeeded")
	}
}
