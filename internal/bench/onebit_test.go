package bench

import (
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

// TestOneBitOp: --op onebit parses (with DeepSpeed's name too), stays out
// of --op all, counts its float32 input as S with all-reduce's bus factor,
// refuses other element types, and runs checked on 1 to 3 ranks with every
// rank getting the same result.
func TestOneBitOp(t *testing.T) {
	for _, name := range []string{"onebit", "compressed_allreduce", "ONEBIT"} {
		if op, err := ParseOp(name); err != nil || op != OneBit {
			t.Errorf("ParseOp(%q) = %v, %v", name, op, err)
		}
	}
	for _, op := range AllOps {
		if op == OneBit {
			t.Error("onebit is in --op all")
		}
	}
	if got, want := OneBit.BusFactor(4), AllReduce.BusFactor(4); got != want {
		t.Errorf("onebit bus factor %v, want all-reduce's %v", got, want)
	}
	sc := SweepConfig{Ops: []OpSpec{{Op: OneBit}}, Min: 4, Max: 1 << 16, Factor: 8, Warmup: 1, Iters: 3}
	if _, err := BuildPlan(sc, core.Float64, core.Sum, true, 2); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Errorf("onebit on float64: err = %v, want one naming float32", err)
	}
	for n := 1; n <= 3; n++ {
		plan, err := BuildPlan(sc, core.Float32, core.Sum, true, n)
		if err != nil {
			t.Fatal(err)
		}
		samples, _, _ := runLocal(t, n, plan)
		if len(samples) != len(plan.Cases) {
			t.Fatalf("%d ranks: %d samples for %d cases", n, len(samples), len(plan.Cases))
		}
		for _, s := range samples {
			if s.Wrong != 0 {
				t.Errorf("%d ranks, %d bytes: %d elements differ between ranks", n, s.Bytes, s.Wrong)
			}
			if s.Op != OneBit || s.Bytes%4 != 0 {
				t.Errorf("sample %+v", s.Case)
			}
		}
	}
}
