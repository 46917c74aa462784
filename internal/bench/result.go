package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gocomm/comm"
)

// Sample is what one run measured for one case.
type Sample struct {
	Case
	// Times holds one duration per timed iteration, in seconds: for each
	// iteration the slowest rank's. A ping-pong iteration is a round trip.
	Times []float64
	// Loop is the duration of the whole timed loop divided by its
	// iterations, in seconds, the slowest rank's: the time nccl-tests and
	// OSU's benchmarks report. It does not count a rank's waiting for
	// another twice, as the slowest-per-iteration Times do when ranks run
	// out of phase. 0: not measured (Times' mean stands in).
	Loop float64
	// Wrong counts the wrong elements of the check run over all ranks, or
	// is -1 when the run did not check.
	Wrong int64
	// Skip, when not empty, says why the runner could not run the case
	// (a peer without the op); Times is then empty.
	Skip string
}

// Result is one row of commbench's output: a case, its timing and its
// bandwidths.
type Result struct {
	Series string  `json:"series,omitempty"`
	Op     Op      `json:"op"`
	Bytes  int64   `json:"size"`  // S, the full buffer (nccl-tests' size column)
	Count  int     `json:"count"` // elements of S
	DType  string  `json:"type"`
	RedOp  string  `json:"redop"` // "none" for ops that do not reduce
	Root   int     `json:"root"`  // -1 for ops without a root
	Ranks  int     `json:"ranks"`
	Warmup int     `json:"warmup"`
	Iters  int     `json:"iters"`
	TimeUS float64 `json:"time_us"` // mean over iterations
	MinUS  float64 `json:"min_us"`
	MedUS  float64 `json:"median_us"`
	P99US  float64 `json:"p99_us,omitempty"` // 99th percentile of the iterations (comparison mode: median over runs)
	MaxUS  float64 `json:"max_us"`
	AlgBW  float64 `json:"algbw_gbps"` // GB/s, 1e9 bytes per second, from the mean time
	BusBW  float64 `json:"busbw_gbps"`
	Wrong  int64   `json:"wrong"` // -1: not checked
	// Runs is how many runs the time is the median of (comparison mode).
	Runs int    `json:"runs,omitempty"`
	Skip string `json:"skipped,omitempty"`
	// Algo is the Open MPI tuned algorithm a best-of series' row was
	// measured with, "K name" (e.g. "4 ring"); "" elsewhere.
	Algo string `json:"algorithm,omitempty"`
}

// Summarize turns a sample of n ranks into a result row. A ping-pong's
// time is half the round trip: the one-way latency.
func Summarize(series string, n int, dt comm.DType, redop comm.ReduceOp, s Sample) Result {
	r := Result{
		Series: series, Op: s.Op, Bytes: s.Bytes, DType: dt.String(), RedOp: "none", Root: -1,
		Ranks: n, Warmup: s.Warmup, Iters: s.Iters, Wrong: s.Wrong, Skip: s.Skip,
	}
	if es := dt.Size(); es > 0 {
		r.Count = int(s.Bytes / int64(es))
	}
	if s.Op.Reduces() {
		r.RedOp = RedOpName(redop)
	}
	if s.Op.Rooted() {
		r.Root = s.Root
	}
	if len(s.Times) == 0 {
		return r
	}
	scale := 1e6
	if s.Op == PingPong {
		scale /= 2
	}
	st := Stats(s.Times)
	r.Iters = len(s.Times)
	r.TimeUS, r.MinUS, r.MedUS, r.MaxUS = s.time(st)*scale, st.Min*scale, st.Median*scale, st.Max*scale
	r.P99US = st.P99 * scale
	r.AlgBW, r.BusBW = s.Op.Bandwidths(s.Bytes, r.TimeUS/1e6, n)
	return r
}

// time is the sample's reported time per iteration: Loop when measured,
// else the mean of Times (st, their statistics).
func (s Sample) time(st Summary) float64 {
	if s.Loop > 0 {
		return s.Loop
	}
	return st.Mean
}

// Summary holds the statistics of a set of durations.
type Summary struct{ Mean, Min, Median, P99, Max float64 }

// Stats summarises xs (which it does not modify); all zero when empty.
func Stats(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{Mean: sum / float64(len(s)), Min: s[0], Median: Median(s), P99: Quantile(s, 0.99), Max: s[len(s)-1]}
}

// Quantile q (0..1) of sorted xs, nearest rank: the smallest element
// with at least q of the elements at or below it; NaN when empty.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}

// Median of sorted xs: the middle element, or the mean of the middle two.
func Median(sorted []float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Raw results format: what a runner (commbench's own ranks or a peer
// harness) writes for the parent to summarise. One item a line:
//
//	gocomm-bench-raw 1
//	ranks <n>
//	case <op> <bytes> <warmup> <root> <wrong> <t1_us> <t2_us> ...
//	loop <us>
//	skip <op> <bytes> <reason ...>
//
// Times are microseconds, one per timed iteration (the slowest rank's);
// the optional loop line after a case is Sample.Loop in microseconds.
const rawMagic = "gocomm-bench-raw 1"

// WriteRaw writes the samples of an n-rank run in the raw format.
func WriteRaw(w io.Writer, n int, samples []Sample) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\nranks %d\n", rawMagic, n)
	for _, s := range samples {
		if s.Skip != "" {
			reason := strings.Join(strings.Fields(s.Skip), " ")
			if reason == "" {
				reason = "skipped" // a blank reason would not read back
			}
			fmt.Fprintf(bw, "skip %v %d %s\n", s.Op, s.Bytes, reason)
			continue
		}
		fmt.Fprintf(bw, "case %v %d %d %d %d", s.Op, s.Bytes, s.Warmup, s.Root, s.Wrong)
		for _, t := range s.Times {
			bw.WriteByte(' ')
			bw.WriteString(strconv.FormatFloat(t*1e6, 'g', 9, 64))
		}
		bw.WriteByte('\n')
		if s.Loop > 0 {
			fmt.Fprintf(bw, "loop %s\n", strconv.FormatFloat(s.Loop*1e6, 'g', 9, 64))
		}
	}
	return bw.Flush()
}

// ParseRaw reads the raw format: the world size and the samples.
func ParseRaw(r io.Reader) (n int, samples []Sample, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if line == 1 {
			if t != rawMagic {
				return 0, nil, fmt.Errorf("raw results: line 1 is %q, want %q", trimForError(t), rawMagic)
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		bad := func(why string) error {
			return fmt.Errorf("raw results: line %d %q: %s", line, trimForError(t), why)
		}
		switch f[0] {
		case "ranks":
			if len(f) != 2 {
				return 0, nil, bad("want ranks <n>")
			}
			v, err := strconv.Atoi(f[1])
			if err != nil || v < 1 {
				return 0, nil, bad("want a positive rank count")
			}
			n = v
		case "loop":
			if len(samples) == 0 || samples[len(samples)-1].Skip != "" || samples[len(samples)-1].Loop != 0 {
				return 0, nil, bad("a loop line belongs right after its case line")
			}
			if len(f) != 2 {
				return 0, nil, bad("want loop <us>")
			}
			x, err := strconv.ParseFloat(f[1], 64)
			if err != nil || x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return 0, nil, bad(fmt.Sprintf("loop time %q is not a positive number", f[1]))
			}
			samples[len(samples)-1].Loop = x / 1e6
		case "skip":
			if len(f) < 4 {
				// A skip without its reason would read back as a case
				// with no times.
				return 0, nil, bad("want skip <op> <bytes> <reason>")
			}
			op, err := ParseOp(f[1])
			if err != nil {
				return 0, nil, bad(err.Error())
			}
			b, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil || b < 0 {
				return 0, nil, bad("bad size")
			}
			samples = append(samples, Sample{Case: Case{Op: op, Bytes: b}, Wrong: -1, Skip: strings.Join(f[3:], " ")})
		case "case":
			if len(f) < 6 {
				return 0, nil, bad("want case <op> <bytes> <warmup> <root> <wrong> <times...>")
			}
			op, err := ParseOp(f[1])
			if err != nil {
				return 0, nil, bad(err.Error())
			}
			v, err := parseInts(f[2:6])
			if err != nil {
				return 0, nil, bad(err.Error())
			}
			if v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < -1 {
				return 0, nil, bad("negative size, warm-up, root or wrong count")
			}
			s := Sample{Case: Case{Op: op, Bytes: v[0], Warmup: int(v[1]), Root: int(v[2])}, Wrong: v[3]}
			for _, ts := range f[6:] {
				x, err := strconv.ParseFloat(ts, 64)
				if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
					return 0, nil, bad(fmt.Sprintf("time %q is not a non-negative number", ts))
				}
				s.Times = append(s.Times, x/1e6)
			}
			if len(s.Times) == 0 {
				return 0, nil, bad("no times")
			}
			s.Iters = len(s.Times)
			samples = append(samples, s)
		default:
			return 0, nil, bad("unknown item")
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, fmt.Errorf("raw results: %w", err)
	}
	if line == 0 {
		return 0, nil, fmt.Errorf("raw results: empty")
	}
	if n == 0 {
		return 0, nil, fmt.Errorf("raw results: no ranks line")
	}
	return n, samples, nil
}
