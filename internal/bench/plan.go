package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/core"
)

// Case is one measurement: an op at one size.
type Case struct {
	Op Op
	// Bytes is the full buffer S of nccl-tests (see LayoutOf), already
	// rounded to whole elements and blocks; 0 for a barrier.
	Bytes  int64
	Warmup int
	Iters  int
	Root   int // rooted ops; 0 otherwise
}

// Plan is what every rank (and every peer harness) runs: the same cases in
// the same order, on buffers of one element type.
type Plan struct {
	DType comm.DType
	RedOp comm.ReduceOp
	Check bool // verify every case once after timing it
	// Shared: the buffers come from comm.AllocShared (--shared-buffers);
	// InPlace: all-reduces pass one buffer as send and recv (--in-place).
	Shared, InPlace bool
	Cases           []Case
}

// SweepConfig is what BuildPlan turns into cases.
type SweepConfig struct {
	Ops      []OpSpec
	Min, Max int64   // -b, -e
	Factor   float64 // -f
	Step     int64   // --step, when Factor <= 1
	Warmup   int     // -w
	Iters    int     // -i
	// Budget caps iters*S per case (0: no cap), so that a sweep's large
	// sizes do not take minutes; a case keeps at least min(Iters,
	// minBudgetIters) iterations and one warm-up.
	Budget int64
	Root   int
}

// minBudgetIters is the fewest timed iterations Budget leaves a case.
const minBudgetIters = 5

// BuildPlan lists the cases of a sweep for n ranks of elements of dt.
// Sizes too small to hold one element per rank block are left out; a
// barrier is one case of size 0.
func BuildPlan(sc SweepConfig, dt comm.DType, redop comm.ReduceOp, check bool, n int) (Plan, error) {
	p := Plan{DType: dt, RedOp: redop, Check: check}
	switch {
	case !dt.Valid() || dt == core.Byte:
		return p, fmt.Errorf("element type %v cannot be benchmarked", dt)
	case n < 1:
		return p, fmt.Errorf("%d ranks: want at least 1", n)
	case sc.Warmup < 0:
		return p, fmt.Errorf("warm-up iterations (-w) %d: want >= 0", sc.Warmup)
	case sc.Iters < 1:
		return p, fmt.Errorf("iterations (-i) %d: want >= 1", sc.Iters)
	case sc.Root < 0 || sc.Root >= n:
		return p, fmt.Errorf("root %d out of range for %d ranks", sc.Root, n)
	case sc.Budget < 0:
		return p, fmt.Errorf("budget %d: want >= 0", sc.Budget)
	}
	for _, spec := range sc.Ops {
		if spec.Op.Reduces() && !redop.ValidFor(dt) {
			return p, fmt.Errorf("%v cannot reduce %v with %s", spec.Op, dt, RedOpName(redop))
		}
		if spec.Op == OneBit && dt != core.Float32 {
			return p, fmt.Errorf("onebit compresses float32 only (-d float32), not %v", dt)
		}
		if (spec.Op == PingPong || spec.Op == SendRecv) && n < 2 {
			return p, fmt.Errorf("%v needs at least 2 ranks", spec.Op)
		}
		if spec.Op == Barrier {
			p.Cases = append(p.Cases, Case{Op: Barrier, Warmup: sc.Warmup, Iters: sc.Iters})
			continue
		}
		lo, hi := sc.Min, sc.Max
		if spec.Min != 0 || spec.Max != 0 {
			lo, hi = spec.Min, spec.Max
		}
		sizes, err := Sweep(lo, hi, sc.Factor, sc.Step)
		if err != nil {
			return p, err
		}
		last := int64(-1)
		for _, s := range sizes {
			l, ok := LayoutOf(spec.Op, s, dt.Size(), n)
			if !ok {
				continue
			}
			b := int64(l.Count) * int64(dt.Size())
			if b == last {
				continue // rounding made two sizes one
			}
			last = b
			c := Case{Op: spec.Op, Bytes: b, Warmup: sc.Warmup, Iters: sc.Iters}
			if spec.Op.Rooted() {
				c.Root = sc.Root
			}
			c.Warmup, c.Iters = budgeted(sc.Warmup, sc.Iters, b, sc.Budget)
			p.Cases = append(p.Cases, c)
		}
	}
	if len(p.Cases) == 0 {
		return p, fmt.Errorf("no case to run: every size is below one %v element per rank", dt)
	}
	return p, nil
}

// budgeted caps warm-ups and iterations so that iters*size <= budget.
func budgeted(warmup, iters int, size, budget int64) (int, int) {
	if budget <= 0 || size <= 0 {
		return warmup, iters
	}
	k := budget / size
	if lo := int64(min(iters, minBudgetIters)); k < lo {
		k = lo
	}
	iters = int(min(int64(iters), k))
	warmup = int(min(int64(warmup), max(1, k/4)))
	return warmup, iters
}

// MaxBytes is the largest case size of the plan.
func (p Plan) MaxBytes() int64 {
	var m int64
	for _, c := range p.Cases {
		m = max(m, c.Bytes)
	}
	return m
}

// Plan text format: what the peer harnesses read. One item a line:
//
//	gocomm-bench-plan 1
//	dtype float32
//	redop sum
//	check 1
//	case <op> <bytes> <warmup> <iters> <root>
//	...
//
// Blank lines and lines starting with # are ignored.
const planMagic = "gocomm-bench-plan 1"

// WritePlan writes p in the plan text format.
func WritePlan(w io.Writer, p Plan) error {
	bw := bufio.NewWriter(w)
	check := 0
	if p.Check {
		check = 1
	}
	fmt.Fprintf(bw, "%s\ndtype %v\nredop %s\ncheck %d\n", planMagic, p.DType, RedOpName(p.RedOp), check)
	for _, c := range p.Cases {
		fmt.Fprintf(bw, "case %v %d %d %d %d\n", c.Op, c.Bytes, c.Warmup, c.Iters, c.Root)
	}
	return bw.Flush()
}

// ParsePlan reads the plan text format.
func ParsePlan(r io.Reader) (Plan, error) {
	var p Plan
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	var haveType, haveOp bool
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if line == 1 {
			if t != planMagic {
				return p, fmt.Errorf("plan: line 1 is %q, want %q", trimForError(t), planMagic)
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		bad := func(why string) error { return fmt.Errorf("plan: line %d %q: %s", line, trimForError(t), why) }
		switch f[0] {
		case "dtype":
			if len(f) != 2 {
				return p, bad("want dtype <name>")
			}
			dt, err := ParseDType(f[1])
			if err != nil {
				return p, bad(err.Error())
			}
			p.DType, haveType = dt, true
		case "redop":
			if len(f) != 2 {
				return p, bad("want redop <name>")
			}
			op, err := ParseRedOp(f[1])
			if err != nil {
				return p, bad(err.Error())
			}
			p.RedOp, haveOp = op, true
		case "check":
			if len(f) != 2 || (f[1] != "0" && f[1] != "1") {
				return p, bad("want check 0 or check 1")
			}
			p.Check = f[1] == "1"
		case "case":
			if len(f) != 6 {
				return p, bad("want case <op> <bytes> <warmup> <iters> <root>")
			}
			op, err := ParseOp(f[1])
			if err != nil {
				return p, bad(err.Error())
			}
			n, err := parseInts(f[2:])
			if err != nil {
				return p, bad(err.Error())
			}
			if n[0] < 0 || n[1] < 0 || n[2] < 1 || n[3] < 0 {
				return p, bad("bytes, warmup and root must be >= 0 and iters >= 1")
			}
			p.Cases = append(p.Cases, Case{Op: op, Bytes: n[0], Warmup: int(n[1]), Iters: int(n[2]), Root: int(n[3])})
		default:
			return p, bad("unknown item")
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("plan: %w", err)
	}
	switch {
	case line == 0:
		return p, fmt.Errorf("plan: empty")
	case !haveType || !haveOp:
		return p, fmt.Errorf("plan: dtype and redop are required")
	}
	return p, nil
}

func parseInts(fs []string) ([]int64, error) {
	out := make([]int64, len(fs))
	for i, s := range fs {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		out[i] = v
	}
	return out, nil
}

func trimForError(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// dtypeNames are the names ParseDType accepts besides DType.String().
var dtypeNames = map[string]comm.DType{
	"float": core.Float32, "f32": core.Float32, "fp32": core.Float32,
	"double": core.Float64, "f64": core.Float64, "fp64": core.Float64,
	"half": core.Float16, "f16": core.Float16, "fp16": core.Float16,
	"bf16": core.BFloat16, "int": core.Int32, "uint": core.Uint32,
	"char": core.Int8, "uchar": core.Uint8,
}

// ParseDType parses an element type name: float32, float64, float16,
// bfloat16, int8..int64, uint8..uint64, and nccl-tests' and torch's
// spellings (float, double, half, bf16, int, ...).
func ParseDType(s string) (comm.DType, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for d := core.Int8; d < core.Byte; d++ {
		if d.String() == s {
			return d, nil
		}
	}
	if d, ok := dtypeNames[s]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("unknown type %q (want float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8, uint16, uint32 or uint64)", s)
}

// RedOpName is the lower-case name of a reduction operator, as the -o
// flag and the redop column spell it.
func RedOpName(op comm.ReduceOp) string { return strings.ToLower(op.String()) }

// ParseRedOp parses a reduction operator: sum, prod, min, max, avg, band,
// bor, bxor.
func ParseRedOp(s string) (comm.ReduceOp, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for op := core.Sum; op <= core.Avg; op++ {
		if RedOpName(op) == s {
			return op, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction op %q (want sum, prod, min, max, avg, band, bor or bxor)", s)
}
