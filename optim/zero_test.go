package optim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/commtest"
	"github.com/gocomm/comm/internal/testkit"
)

// zeroTransports are the worlds ZeRO is tested over: in-process channels,
// TCP, and shared memory.
var zeroTransports = []string{"inproc", "tcp", "shm"}

// openWorld builds a world of n ranks over transport, closed when the test
// ends.
func openWorld(t testing.TB, transport string, n int) []*comm.Comm {
	t.Helper()
	return commtest.World(t, transport, n, comm.Options{})
}

// zeroShapes are uneven tensor lengths; with small bucket caps they make
// several buckets, some holding several tensors and one (the 2500) alone,
// and buckets of fewer elements than ranks.
var zeroShapes = []int{37, 1, 1000, 5, 2500, 3, 64}

// zeroBuckets are caps small enough for several buckets.
var zeroBuckets = ddp.Options{BucketCapBytes: 4 << 10, FirstBucketCapBytes: 256}

func zeroParams(shapes []int) [][]float32 {
	ps := make([][]float32, len(shapes))
	for i, n := range shapes {
		ps[i] = make([]float32, n)
		for j := range ps[i] {
			ps[i][j] = float32(math.Sin(float64(7*i + j))) // the same on every rank
		}
	}
	return ps
}

// averageGrads is the reference's gradient at step s: the average over
// size ranks of localGrads, summed in rank order.
func averageGrads(size, s int, shapes []int) [][]float32 {
	avg := make([][]float32, len(shapes))
	for i, n := range shapes {
		avg[i] = make([]float32, n)
		g := make([]float32, n)
		for r := range size {
			localGrads(r*100+i, s, g)
			for j := range g {
				avg[i][j] += g[j]
			}
		}
		for j := range avg[i] {
			avg[i][j] /= float32(size)
		}
	}
	return avg
}

// runZero takes steps ZeRO steps of the given stage on a world and returns
// every rank's parameters after every step. Ranks mark gradients ready in
// different orders, as backward threads might.
func runZero(t *testing.T, w []*comm.Comm, cfg ZeroConfig, shapes []int, steps int) [][][][]float32 {
	t.Helper()
	ctx := testkit.Context(t, time.Minute)
	out := make([][][][]float32, len(w)) // rank, step, tensor
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		params := zeroParams(shapes)
		z, err := NewZero(ctx, c, cfg, params...)
		if err != nil {
			return err
		}
		for s := range steps {
			order := make([]int, len(shapes))
			for i := range order {
				order[i] = (i + r + s) % len(shapes)
			}
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, i := range order {
				localGrads(r*100+i, s, z.Grad(i))
				if err := z.Ready(ctx, i); err != nil {
					return err
				}
			}
			if err := z.Step(ctx); err != nil {
				return err
			}
			snap := make([][]float32, len(params))
			for i, p := range params {
				snap[i] = slices.Clone(p)
			}
			out[r] = append(out[r], snap)
			for i := range shapes {
				if g := z.Grad(i); slices.ContainsFunc(g, func(x float32) bool { return x != 0 }) {
					return fmt.Errorf("step %d: gradient %d not zero after Step", s+1, i)
				}
			}
		}
		if z.Steps() != steps || z.Stage() != cfg.Stage {
			return fmt.Errorf("Steps %d, Stage %d", z.Steps(), z.Stage())
		}
		return nil
	}))
	return out
}

// ZeRO-1 and ZeRO-2 end every step where Adam over the averaged gradients
// ends, within the tolerance of the reductions' summation order, and every
// rank holds the same bits. World sizes 1 to 4 (3: uneven shares) over
// every transport.
func TestZeroMatchesAdam(t *testing.T) {
	const steps = 4
	cfgs := []Config{{LR: 0.01}, {LR: 0.01, WeightDecay: 0.1, DecoupledWeightDecay: true}}
	for _, transport := range zeroTransports {
		for _, size := range []int{1, 2, 3, 4} {
			if transport != "inproc" && size == 1 {
				continue // a world of one does not communicate
			}
			for _, stage := range []int{1, 2} {
				cfg := cfgs[(size+stage)%len(cfgs)]
				t.Run(fmt.Sprintf("%s/%d ranks/stage %d", transport, size, stage), func(t *testing.T) {
					w := openWorld(t, transport, size)
					got := runZero(t, w, ZeroConfig{Config: cfg, Stage: stage, Buckets: zeroBuckets}, zeroShapes, steps)
					ref := zeroParams(zeroShapes)
					a, err := NewAdam(cfg, ref...)
					if err != nil {
						t.Fatal(err)
					}
					for s := range steps {
						if err := a.Step(averageGrads(size, s, zeroShapes)...); err != nil {
							t.Fatal(err)
						}
						worst := 0.0
						for i := range ref {
							for j, want := range ref[i] {
								worst = max(worst, math.Abs(float64(got[0][s][i][j]-want)))
							}
						}
						if worst > 1e-5 {
							t.Errorf("step %d: parameters differ from Adam's by up to %.3g", s+1, worst)
						}
						for r := 1; r < size; r++ {
							for i := range ref {
								if !slices.EqualFunc(got[r][s][i], got[0][s][i], func(a, b float32) bool {
									return math.Float32bits(a) == math.Float32bits(b)
								}) {
									t.Fatalf("step %d: rank %d's tensor %d differs from rank 0's", s+1, r, i)
								}
							}
						}
					}
				})
			}
		}
	}
}

// On one rank there is no summation to reorder: ZeRO is Adam bit for bit.
func TestZeroOnOneRankIsAdam(t *testing.T) {
	for _, stage := range []int{1, 2} {
		w := openWorld(t, "inproc", 1)
		cfg := Config{LR: 0.01, WeightDecay: 0.01}
		got := runZero(t, w, ZeroConfig{Config: cfg, Stage: stage, Buckets: zeroBuckets}, zeroShapes, 3)
		ref := zeroParams(zeroShapes)
		a, err := NewAdam(cfg, ref...)
		if err != nil {
			t.Fatal(err)
		}
		for s := range 3 {
			if err := a.Step(averageGrads(1, s, zeroShapes)...); err != nil {
				t.Fatal(err)
			}
			for i := range ref {
				if !slices.Equal(got[0][s][i], ref[i]) {
					t.Fatalf("stage %d step %d tensor %d: ZeRO %v, Adam %v", stage, s+1, i, got[0][s][i][:3], ref[i][:3])
				}
			}
		}
	}
}

// Each rank holds about 1/N of Adam's state: all shares together are
// exactly Adam's, and no rank holds more than 1.1x Adam's / N.
func TestZeroStateIsPartitioned(t *testing.T) {
	shapes := []int{1000, 3, 4097, 250, 77, 10000}
	ref, err := NewAdam(Config{}, zeroParams(shapes)...)
	if err != nil {
		t.Fatal(err)
	}
	full := ref.StateBytes()
	if want := int64(8 * (1000 + 3 + 4097 + 250 + 77 + 10000)); full != want {
		t.Fatalf("Adam.StateBytes %d, want %d", full, want)
	}
	for _, size := range []int{1, 2, 3, 4} {
		for _, stage := range []int{1, 2} {
			w := openWorld(t, "inproc", size)
			ctx := testkit.Context(t, time.Minute)
			bytes := make([]int64, size)
			testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
				z, err := NewZero(ctx, c, ZeroConfig{Stage: stage, Buckets: zeroBuckets}, zeroParams(shapes)...)
				if err != nil {
					return err
				}
				bytes[r] = z.StateBytes()
				return nil
			}))
			var sum int64
			for r, b := range bytes {
				sum += b
				if float64(b) > 1.1*float64(full)/float64(size) {
					t.Errorf("%d ranks, stage %d: rank %d holds %d B of state, Adam %d B: more than 1.1x 1/%d", size, stage, r, b, full, size)
				}
			}
			if sum != full {
				t.Errorf("%d ranks, stage %d: shares add up to %d B, Adam holds %d B", size, stage, sum, full)
			}
			t.Logf("%d ranks, stage %d: state per rank %v B; Adam %d B, /N = %d B", size, stage, bytes, full, full/int64(size))
		}
	}
}

// Stage 2 holds no gradient in full: with gradients produced in
// backward's order, its gradient memory is the Reducer's pool (two
// buffers of the longest bucket) and its share of the averages, against
// every gradient in stage 1; and both stages take the same steps.
func TestZeroStage2GradMemory(t *testing.T) {
	shapes := make([]int, 24)
	for i := range shapes {
		shapes[i] = 3000 + i
	}
	caps := ddp.Options{BucketCapBytes: 16 << 10, FirstBucketCapBytes: 4 << 10}
	total := 0
	for _, n := range shapes {
		total += n
	}
	for _, transport := range []string{"tcp", "shm"} {
		t.Run(transport, func(t *testing.T) {
			w := openWorld(t, transport, 2)
			ctx := testkit.Context(t, time.Minute)
			params := [3][][][]float32{nil, make([][][]float32, 2), make([][][]float32, 2)} // stage, rank, tensor
			testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
				for _, stage := range []int{1, 2} {
					ps := zeroParams(shapes)
					z, err := NewZero(ctx, c, ZeroConfig{Config: Config{LR: 0.01}, Stage: stage, Buckets: caps}, ps...)
					if err != nil {
						return err
					}
					for s := range 3 {
						for i := len(shapes) - 1; i >= 0; i-- {
							localGrads(r*100+i, s, z.Grad(i))
							if err := z.Ready(ctx, i); err != nil {
								return err
							}
						}
						if err := z.Step(ctx); err != nil {
							return err
						}
					}
					got, share := z.GradBytes(), int64(4*((total+1)/2))
					switch {
					case stage == 1 && got != int64(4*total):
						return fmt.Errorf("stage 1 holds %d B of gradients, want all %d B", got, 4*total)
					case stage == 2 && (got > 2*16<<10+share+8 || 3*got > 2*int64(4*total)):
						return fmt.Errorf("stage 2 holds %d B of gradients: want at most 2 buckets (%d B) and a share (%d B), of %d B", got, 2*16<<10, share, 4*total)
					}
					if r == 0 {
						t.Logf("stage %d: %d B of gradient memory of %d B of gradients", stage, got, 4*total)
					}
					params[stage][r] = ps
				}
				return nil
			}))
			for r := range params[2] {
				for i := range shapes {
					for j, x := range params[2][r][i] {
						if y := params[1][r][i][j]; math.Abs(float64(x-y)) > 1e-5 {
							t.Fatalf("rank %d tensor %d [%d]: stage 2 %v, stage 1 %v", r, i, j, x, y)
						}
					}
				}
			}
		})
	}
}

// Bad configurations are errors that say what to fix.
func TestNewZeroRejectsBadInput(t *testing.T) {
	w := openWorld(t, "inproc", 1)
	ctx := testkit.Context(t, time.Minute)
	for _, tc := range []struct {
		c    *comm.Comm
		cfg  ZeroConfig
		ps   [][]float32
		want string
	}{
		{w[0], ZeroConfig{Stage: 3}, zeroParams([]int{4}), "Stage 3"},
		{w[0], ZeroConfig{}, zeroParams([]int{4}), "Stage 0"},
		{w[0], ZeroConfig{Stage: -1}, zeroParams([]int{4}), "Stage -1"},
		{w[0], ZeroConfig{Stage: 1, Config: Config{LR: -1}}, zeroParams([]int{4}), "LR -1"},
		{w[0], ZeroConfig{Stage: 2}, nil, "no parameter tensors"},
		{nil, ZeroConfig{Stage: 2}, zeroParams([]int{4}), "nil communicator"},
	} {
		z, err := NewZero(ctx, tc.c, tc.cfg, tc.ps...)
		if z != nil || !errors.Is(err, comm.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, %v; want comm.ErrInvalid naming %q", tc.cfg, z, err, tc.want)
		}
	}
}

// Ranks whose tensors differ in number or length fail together at
// NewZero, each with an error, instead of hanging or partitioning
// differently.
func TestNewZeroRejectsRanksThatDisagree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shapes func(r int) []int
	}{
		{"count", func(r int) []int { return zeroShapes[:len(zeroShapes)-r%2] }},
		{"length", func(r int) []int {
			s := slices.Clone(zeroShapes)
			s[2] += r
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := openWorld(t, "inproc", 3)
			ctx := testkit.Context(t, time.Minute)
			errs := testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
				z, err := NewZero(ctx, c, ZeroConfig{Stage: 2, Buckets: zeroBuckets}, zeroParams(tc.shapes(r))...)
				if err == nil && z != nil {
					return errors.New("NewZero accepted tensors that differ across ranks")
				}
				t.Logf("rank %d: %v", r, err)
				return nil
			})
			testkit.NoErrors(t, errs)
		})
	}
}

// A step whose gradients were not all marked ready fails on every rank
// (naming the gradient on the rank that forgot it) instead of hanging the
// others, and a failed Zero refuses further steps.
func TestZeroStepWithoutEveryGradientFails(t *testing.T) {
	w := openWorld(t, "inproc", 2)
	ctx := testkit.Context(t, time.Minute)
	errs := make([]error, 2)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		z, err := NewZero(ctx, c, ZeroConfig{Stage: 2, Buckets: zeroBuckets}, zeroParams(zeroShapes)...)
		if err != nil {
			return err
		}
		for i := range zeroShapes {
			if r == 1 && i == 2 {
				continue
			}
			if err := z.Ready(ctx, i); err != nil {
				return err
			}
		}
		errs[r] = z.Step(ctx)
		if errs[r] == nil {
			return errors.New("Step succeeded")
		}
		if err := z.Step(ctx); err == nil || !strings.Contains(err.Error(), "out of step") {
			return fmt.Errorf("a second Step after a failed one: %v", err)
		}
		return nil
	}))
	if !strings.Contains(errs[1].Error(), "2") {
		t.Errorf("rank 1's error does not name gradient 2: %v", errs[1])
	}
	t.Logf("rank 0: %v\nrank 1: %v", errs[0], errs[1])
}

// Marking a gradient twice, or one that does not exist, is an error.
func TestZeroReadyRejectsBadIndex(t *testing.T) {
	w := openWorld(t, "inproc", 1)
	ctx := testkit.Context(t, time.Minute)
	z, err := NewZero(ctx, w[0], ZeroConfig{Stage: 1}, zeroParams([]int{3, 4})...)
	if err != nil {
		t.Fatal(err)
	}

	if err := z.Ready(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := z.Ready(ctx, 0); err == nil {
		t.Error("Ready(0) twice: no error")
	}
	for _, i := range []int{-1, 2} {
		if err := z.Ready(ctx, i); err == nil {
			t.Errorf("Ready(%d): no error", i)
		}
		if g := z.Grad(i); g != nil {
			t.Errorf("Grad(%d) = %v, want nil", i, g)
		}
	}
}

// Buckets smaller than the world: most ranks own nothing of them, and
// still take part in their collectives.
func TestZeroTinyBuckets(t *testing.T) {
	shapes := []int{1, 2, 1}
	for _, stage := range []int{1, 2} {
		w := openWorld(t, "inproc", 4)
		cfg := Config{LR: 0.01}
		got := runZero(t, w, ZeroConfig{Config: cfg, Stage: stage, Buckets: ddp.Options{BucketCapBytes: 4, FirstBucketCapBytes: 4}}, shapes, 3)
		ref := zeroParams(shapes)
		a, err := NewAdam(cfg, ref...)
		if err != nil {
			t.Fatal(err)
		}
		for s := range 3 {
			if err := a.Step(averageGrads(4, s, shapes)...); err != nil {
				t.Fatal(err)
			}
		}
		for r := range got {
			for i := range ref {
				for j := range ref[i] {
					if d := math.Abs(float64(got[r][2][i][j] - ref[i][j])); d > 1e-5 {
						t.Errorf("stage %d rank %d tensor %d: %v, Adam %v", stage, r, i, got[r][2][i], ref[i])
					}
				}
			}
		}
	}
}

// With Buckets.FindUnused, gradients not marked ready in a step are
// reduced as zeros: ZeRO then matches Adam with zero gradients for them.
func TestZeroFindUnused(t *testing.T) {
	shapes := []int{5, 300, 7, 41}
	const steps = 3
	used := func(s, i int) bool { return (i+s)%3 != 0 } // the same on every rank
	w := openWorld(t, "inproc", 3)
	ctx := testkit.Context(t, time.Minute)
	cfg := Config{LR: 0.01}
	got := make([][][]float32, 3)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
		params := zeroParams(shapes)
		z, err := NewZero(ctx, c, ZeroConfig{Config: cfg, Stage: 2, Buckets: ddp.Options{BucketCapBytes: 512, FirstBucketCapBytes: 64, FindUnused: true}}, params...)
		if err != nil {
			return err
		}
		for s := range steps {
			for i := range shapes {
				localGrads(r*100+i, s, z.Grad(i)) // unmarked ones too: the Reducer must drop them
				if used(s, i) {
					if err := z.Ready(ctx, i); err != nil {
						return err
					}
				}
			}
			if err := z.Step(ctx); err != nil {
				return err
			}
		}
		got[r] = params
		return nil
	}))
	ref := zeroParams(shapes)
	a, err := NewAdam(cfg, ref...)
	if err != nil {
		t.Fatal(err)
	}
	for s := range steps {
		g := averageGrads(3, s, shapes)
		for i := range g {
			if !used(s, i) {
				clear(g[i])
			}
		}
		if err := a.Step(g...); err != nil {
			t.Fatal(err)
		}
	}
	for r := range got {
		for i := range ref {
			for j := range ref[i] {
				if d := math.Abs(float64(got[r][i][j] - ref[i][j])); d > 1e-5 {
					t.Fatalf("rank %d tensor %d element %d: %v, Adam %v", r, i, j, got[r][i][j], ref[i][j])
				}
			}
		}
	}
}
