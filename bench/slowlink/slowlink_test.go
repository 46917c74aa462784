package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
)

// compare on an in-process world: both ops are timed the asked number of
// times, the 1-bit result is the same on every rank and near the exact
// average, and the result line says so. (No speed is asserted.)
func TestCompare(t *testing.T) {
	for _, n := range []int{2, 3} {
		w, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cfg := config{size: 1000 * 4, runs: 3, warmup: 1, label: "in process"}
		res := make([]result, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r, c := range w {
			wg.Go(func() {
				defer c.Close()
				res[r], errs[r] = compare(ctx, c, cfg)
			})
		}
		wg.Wait()
		cancel()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks, rank %d: %v", n, r, err)
			}
		}
		r := res[0]
		if len(r.plain.times) != 3 || len(r.onebit.times) != 3 || r.plain.median() <= 0 || r.onebit.median() <= 0 {
			t.Errorf("%d ranks: times %v and %v", n, r.plain.times, r.onebit.times)
		}
		if !r.identicalRanks {
			t.Errorf("%d ranks: the 1-bit result differs between ranks", n)
		}
		// One sign per value and a scale per chunk: about 60% of the
		// norm of an average of Gaussians is lost, never all of it.
		if !(r.relErr > 0 && r.relErr < 1) {
			t.Errorf("%d ranks: relative error %.3f", n, r.relErr)
		}
		var out bytes.Buffer
		writeResult(&out, cfg, r)
		if !strings.Contains(out.String(), "identical on all ranks: true") || !strings.Contains(out.String(), "medians of 3") {
			t.Errorf("result line:\n%s", out.String())
		}
	}
}

func TestCompareRejectsBadConfig(t *testing.T) {
	w, err := comm.NewLocalWorld(1, comm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w[0].Close()
	for _, cfg := range []config{{size: 2, runs: 1}, {size: 64, runs: 0}, {size: 64, runs: 1, warmup: -1}} {
		if _, err := compare(context.Background(), w[0], cfg); !errors.Is(err, comm.ErrInvalid) {
			t.Errorf("%+v: got %v, want comm.ErrInvalid", cfg, err)
		}
	}
}

func TestTimingMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {[]time.Duration{3}, 3}, {[]time.Duration{5, 1, 3}, 3}, {[]time.Duration{4, 1, 3, 8}, 3}} {
		if got := (timing{times: tc.in}).median(); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
