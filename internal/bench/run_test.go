package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/core"
)

// runLocal runs plan on an in-process world of n ranks and returns rank
// 0's samples and the indices its hooks saw.
func runLocal(t *testing.T, n int, plan Plan) ([]Sample, []int, []int) {
	t.Helper()
	world, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range world {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var started, done []int
	hooks := &Hooks{
		Start: func(i int, _ Case) { started = append(started, i) },
		Done:  func(i int, _ Sample) { done = append(done, i) },
	}
	results := make([][]Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r], errs[r] = Run(ctx, c, plan, hooks) // hooks run on rank 0 only
			if errs[r] != nil {
				c.Abort(errs[r])
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if r > 0 && results[r] != nil {
			t.Errorf("rank %d got samples", r)
		}
	}
	return results[0], started, done
}

// Every op, checked, over the real library on in-memory channels: the
// expected results are what gocomm computes.
func TestRunChecksEveryOp(t *testing.T) {
	for _, tc := range []struct {
		dt    core.DType
		redop core.Op
		n     int
	}{
		{core.Float32, core.Sum, 2},
		{core.Float32, core.Avg, 3},
		{core.Float16, core.Max, 4},
		{core.BFloat16, core.Sum, 3},
		{core.Int8, core.Prod, 3},
		{core.Uint32, core.BXor, 2},
		{core.Float64, core.Min, 3},
	} {
		sc := SweepConfig{Ops: []OpSpec{{Op: AllReduce}}, Min: 4, Max: 4 << 10, Factor: 8, Warmup: 1, Iters: 2, Root: tc.n - 1}
		sc.Ops, _ = ParseOpSpecs("all")
		plan, err := BuildPlan(sc, tc.dt, tc.redop, true, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		samples, started, done := runLocal(t, tc.n, plan)
		if len(samples) != len(plan.Cases) || len(started) != len(plan.Cases) || len(done) != len(plan.Cases) {
			t.Fatalf("%v: %d samples, %d starts, %d dones for %d cases", tc.dt, len(samples), len(started), len(done), len(plan.Cases))
		}
		for i, s := range samples {
			if s.Case != plan.Cases[i] {
				t.Errorf("sample %d is of case %+v, want %+v", i, s.Case, plan.Cases[i])
			}
			if s.Wrong != 0 {
				t.Errorf("%v %v n=%d: %v of %d bytes: %d wrong elements", tc.dt, tc.redop, tc.n, s.Op, s.Bytes, s.Wrong)
			}
			if len(s.Times) != s.Iters {
				t.Errorf("%v: %d times for %d iterations", s.Op, len(s.Times), s.Iters)
			}
			for _, x := range s.Times {
				if x <= 0 {
					t.Errorf("%v: time %g", s.Op, x)
				}
			}
		}
	}
}

func TestRunWithoutCheck(t *testing.T) {
	sc := SweepConfig{Ops: []OpSpec{{Op: AllReduce}}, Min: 8, Max: 8, Factor: 2, Warmup: 0, Iters: 3}
	plan, err := BuildPlan(sc, core.Float32, core.Sum, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	samples, _, _ := runLocal(t, 1, plan)
	if len(samples) != 1 || samples[0].Wrong != -1 || len(samples[0].Times) != 3 {
		t.Errorf("samples = %+v", samples)
	}
}

func TestRunRejectsAPlanThatDoesNotFit(t *testing.T) {
	world, err := comm.NewLocalWorld(1, comm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer world[0].Close()
	plan := Plan{DType: core.Float32, Cases: []Case{{Op: AllToAll, Bytes: 2, Iters: 1}}}
	if _, err := Run(context.Background(), world[0], plan, nil); err == nil {
		t.Error("Run of a 2-byte float32 all-to-all succeeded")
	}
	if _, err := Run(context.Background(), world[0], Plan{DType: core.Byte}, nil); err == nil {
		t.Error("Run of byte elements succeeded")
	}
}
