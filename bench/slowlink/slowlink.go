package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/bench"
	"github.com/gocomm/comm/onebit"
)

// config is the command line.
type config struct {
	procs  int    // ranks to start when no launcher started us
	size   int64  // bytes of float32 per rank
	runs   int    // timed runs of each op
	warmup int    // untimed runs of each op first
	label  string // printed in the result line (e.g. the link rate)
}

// timing is one op's times per run, each the slowest rank's.
type timing struct {
	name  string
	times []time.Duration
}

func (t timing) median() time.Duration {
	s := slices.Clone(t.times)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// result is what compare measured.
type result struct {
	ranks          int
	size           int64
	plain, onebit  timing
	relErr         float64 // ‖1-bit result − exact average‖ / ‖exact average‖, first call
	identicalRanks bool    // every rank got the same 1-bit result bits
}

// speedup is the plain all-reduce's median over the 1-bit one's.
func (r result) speedup() float64 {
	if m := r.onebit.median(); m > 0 {
		return float64(r.plain.median()) / float64(m)
	}
	return 0
}

// compare runs cfg.warmup then cfg.runs rounds of a plain all-reduce
// (comm.AllReduce, Avg) and of onebit.AllReduce on cfg.size bytes of
// float32, alternating which goes first, on every rank of c.
func compare(ctx context.Context, c *comm.Comm, cfg config) (result, error) {
	n := int(cfg.size / 4)
	if n < 1 || cfg.runs < 1 || cfg.warmup < 0 {
		return result{}, fmt.Errorf("%w: slowlink: size %d B, runs %d, warmup %d: use a size of at least 4 B, runs >= 1, warmup >= 0",
			comm.ErrInvalid, cfg.size, cfg.runs, cfg.warmup)
	}
	input := make([]float32, n)
	rng := rand.New(rand.NewPCG(uint64(c.Rank()), 42))
	for i := range input {
		input[i] = float32(rng.NormFloat64())
	}
	buf := make([]float32, n)
	st := onebit.NewState(n, c.Size())
	res := result{ranks: c.Size(), size: int64(n) * 4, plain: timing{name: "all_reduce"}, onebit: timing{name: "onebit"}}

	// First the accuracy: the 1-bit average of a fresh state against the
	// exact one, and whether every rank got the same bits.
	exact := slices.Clone(input)
	if err := comm.AllReduce(ctx, c, exact, exact, comm.Avg); err != nil {
		return res, fmt.Errorf("slowlink: exact all-reduce: %w", err)
	}
	copy(buf, input)
	if err := onebit.AllReduce(ctx, c, buf, st); err != nil {
		return res, fmt.Errorf("slowlink: 1-bit all-reduce: %w", err)
	}
	res.relErr = relativeError(buf, exact)
	same, err := sameEverywhere(ctx, c, buf)
	if err != nil {
		return res, err
	}
	res.identicalRanks = same

	ops := []struct {
		t   *timing
		run func() error
	}{
		{&res.plain, func() error { return comm.AllReduce(ctx, c, buf, buf, comm.Avg) }},
		{&res.onebit, func() error { return onebit.AllReduce(ctx, c, buf, st) }},
	}
	for round := range cfg.warmup + cfg.runs {
		for k := range ops {
			op := ops[(k+round)%2] // alternate which goes first
			copy(buf, input)
			d, err := timeOne(ctx, c, op.run)
			if err != nil {
				return res, fmt.Errorf("slowlink: %s, round %d: %w", op.t.name, round, err)
			}
			if round >= cfg.warmup {
				op.t.times = append(op.t.times, d)
			}
		}
	}
	return res, nil
}

// timeOne runs op between barriers and returns the slowest rank's time.
func timeOne(ctx context.Context, c *comm.Comm, op func() error) (time.Duration, error) {
	if err := comm.Barrier(ctx, c); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := op(); err != nil {
		return 0, err
	}
	d := []int64{int64(time.Since(start))}
	if err := comm.AllReduce(ctx, c, d, d, comm.Max); err != nil {
		return 0, err
	}
	return time.Duration(d[0]), nil
}

// relativeError is ‖got − want‖ / ‖want‖.
func relativeError(got, want []float32) float64 {
	var num, den float64
	for i, w := range want {
		d := float64(got[i]) - float64(w)
		num += d * d
		den += float64(w) * float64(w)
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// sameEverywhere reports whether buf holds the same bits on every rank:
// the bitwise AND and OR of its words agree.
func sameEverywhere(ctx context.Context, c *comm.Comm, buf []float32) (bool, error) {
	and := make([]uint32, len(buf))
	for i, v := range buf {
		and[i] = math.Float32bits(v)
	}
	or := slices.Clone(and)
	if err := comm.AllReduce(ctx, c, and, and, comm.BAnd); err != nil {
		return false, err
	}
	if err := comm.AllReduce(ctx, c, or, or, comm.BOr); err != nil {
		return false, err
	}
	return slices.Equal(and, or), nil
}

// writeResult prints the result line the script reads, and the runs.
func writeResult(w io.Writer, cfg config, r result) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }
	runs := func(t timing) string {
		s := make([]string, len(t.times))
		for i, d := range t.times {
			s[i] = ms(d)
		}
		return fmt.Sprint(s)
	}
	fmt.Fprintf(w, "slowlink: %d ranks, %s float32, %s: all_reduce %s ms, onebit %s ms (medians of %d, interleaved), onebit %.1fx faster; 1-bit result identical on all ranks: %v, relative error %.3f\n",
		r.ranks, bench.HumanSize(r.size), cfg.label, ms(r.plain.median()), ms(r.onebit.median()), len(r.plain.times),
		r.speedup(), r.identicalRanks, r.relErr)
	fmt.Fprintf(w, "slowlink: runs (ms): all_reduce %s, onebit %s\n", runs(r.plain), runs(r.onebit))
}
