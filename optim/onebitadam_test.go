package optim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// world starts n in-process ranks and runs body on each, failing the test
// with the first error.
func world(t *testing.T, n int, body func(ctx context.Context, c *comm.Comm) error) {
	t.Helper()
	w := testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	})
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(_ int, c *comm.Comm) error { return body(ctx, c) }))
}

// localGrads is rank r's gradient at step s: different on every rank.
func localGrads(r, s int, g []float32) {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(s)))
	for i := range g {
		g[i] = float32(rng.NormFloat64() + 0.1*float64(i%7-3))
	}
}

// On one rank the warm-up is Adam, bit for bit, and the stage switches
// after FreezeStep steps.
func TestOnebitAdamWarmupIsAdamOnOneRank(t *testing.T) {
	cfgs := []Config{{LR: 0.01}, {LR: 0.01, WeightDecay: 0.1}, {LR: 0.01, WeightDecay: 0.1, DecoupledWeightDecay: true, NoBiasCorrection: true}}
	for _, cfg := range cfgs {
		world(t, 1, func(ctx context.Context, c *comm.Comm) error {
			const freeze = 5
			p1 := []float32{1, -2, 3, 0.5, 0, 7}
			p2 := slices.Clone(p1)
			o, err := NewOnebitAdam(c, OnebitConfig{Config: cfg, FreezeStep: freeze}, p1)
			if err != nil {
				return err
			}
			a, err := NewAdam(cfg, p2)
			if err != nil {
				return err
			}
			g1, g2 := make([]float32, len(p1)), make([]float32, len(p1))
			for s := range freeze {
				if o.Compressing() {
					t.Errorf("%+v: compressing before step %d", cfg, s+1)
				}
				localGrads(0, s, g1)
				copy(g2, g1)
				if err := o.Step(ctx, g1); err != nil {
					return err
				}
				if err := a.Step(g2); err != nil {
					return err
				}
				if !slices.Equal(p1, p2) {
					t.Errorf("%+v: step %d: OnebitAdam %v, Adam %v", cfg, s+1, p1, p2)
				}
			}
			if !o.Compressing() || o.Steps() != freeze {
				t.Errorf("%+v: after %d steps: Compressing %v, Steps %d", cfg, freeze, o.Compressing(), o.Steps())
			}
			// The compression stage on one rank: the momentum passes
			// unchanged, the variance stays frozen.
			v := slices.Clone(o.v[0])
			localGrads(0, freeze, g1)
			if err := o.Step(ctx, g1); err != nil {
				return err
			}
			if !slices.Equal(v, o.v[0]) {
				t.Errorf("%+v: variance moved in the compression stage", cfg)
			}
			return nil
		})
	}
}

// On several ranks, each with its own gradients: the warm-up equals Adam
// over the averaged gradient, and every rank holds the same parameters
// after every step of both stages, while the momenta differ from the
// local ones (they were averaged).
func TestOnebitAdamRanksAgree(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		const freeze, steps, size = 3, 12, 1000 // 1000 does not divide W on 3 ranks
		sums := make([][]float32, n)            // per rank, parameters after each step
		world(t, n, func(ctx context.Context, c *comm.Comm) error {
			r := c.Rank()
			init := make([]float32, size)
			localGrads(99, 0, init)
			p, ref, small := slices.Clone(init), slices.Clone(init), []float32{1, 2, 3}
			o, err := NewOnebitAdam(c, OnebitConfig{Config: Config{LR: 0.01}, FreezeStep: freeze}, p, small)
			if err != nil {
				return err
			}
			a, err := NewAdam(Config{LR: 0.01}, ref)
			if err != nil {
				return err
			}
			g, avg, gs := make([]float32, size), make([]float32, size), make([]float32, 3)
			for s := range steps {
				localGrads(r, s, g)
				localGrads(r+100, s, gs)
				copy(avg, g)
				local := slices.Clone(o.m[0])
				if err := o.Step(ctx, g, gs); err != nil {
					return err
				}
				if s < freeze {
					if err := comm.AllReduce(ctx, c, avg, avg, comm.Avg); err != nil {
						return err
					}
					if err := a.Step(avg); err != nil {
						return err
					}
					if !slices.Equal(p, ref) {
						t.Errorf("%d ranks, rank %d, warm-up step %d: parameters differ from Adam over the averaged gradient", n, r, s+1)
					}
				} else {
					updateMomentum(newCoefficients(o.cfg.Config, s+1, freeze), p, local, g)
					if slices.Equal(local, o.m[0]) {
						t.Errorf("%d ranks, rank %d, step %d: the momentum was not all-reduced", n, r, s+1)
					}
				}
				sums[r] = append(sums[r], p...)
				sums[r] = append(sums[r], small...)
			}
			return nil
		})
		for r := 1; r < n; r++ {
			if !slices.Equal(sums[r], sums[0]) {
				t.Errorf("%d ranks: rank %d's parameters differ from rank 0's", n, r)
			}
		}
	}
}

// A least-squares problem split over 4 ranks (each rank sees only its own
// rows): 1-bit Adam converges as Adam does.
func TestOnebitAdamConverges(t *testing.T) {
	const n, dim, rows, steps, freeze = 4, 64, 32, 600, 60
	truth := make([]float64, dim)
	for i := range truth {
		truth[i] = math.Sin(float64(i))
	}
	// data returns rank r's rows and targets.
	data := func(r int) ([]float64, []float64) {
		rng := rand.New(rand.NewPCG(7, uint64(r)))
		a, b := make([]float64, rows*dim), make([]float64, rows)
		for i := range rows {
			for j := range dim {
				a[i*dim+j] = rng.NormFloat64()
				b[i] += a[i*dim+j] * truth[j]
			}
		}
		return a, b
	}
	// grad writes the gradient of rank r's mean squared error at x into g
	// and returns the loss.
	grad := func(a, b []float64, x, g []float32) float64 {
		clear(g)
		var loss float64
		for i := range rows {
			var e float64
			for j := range dim {
				e += a[i*dim+j] * float64(x[j])
			}
			e -= b[i]
			loss += e * e / rows
			for j := range dim {
				g[j] += float32(2 * e * a[i*dim+j] / rows)
			}
		}
		return loss
	}
	final := map[string]float64{}
	var mu sync.Mutex
	for _, onebit := range []bool{false, true} {
		world(t, n, func(ctx context.Context, c *comm.Comm) error {
			a, b := data(c.Rank())
			x, g := make([]float32, dim), make([]float32, dim)
			cfg := Config{LR: 0.02}
			var step func() error
			if onebit {
				o, err := NewOnebitAdam(c, OnebitConfig{Config: cfg, FreezeStep: freeze}, x)
				if err != nil {
					return err
				}
				step = func() error { return o.Step(ctx, g) }
			} else {
				ad, err := NewAdam(cfg, x)
				if err != nil {
					return err
				}
				step = func() error {
					if err := comm.AllReduce(ctx, c, g, g, comm.Avg); err != nil {
						return err
					}
					return ad.Step(g)
				}
			}
			for range steps {
				grad(a, b, x, g)
				if err := step(); err != nil {
					return err
				}
			}
			loss := []float64{grad(a, b, x, g)}
			if err := comm.AllReduce(ctx, c, loss, loss, comm.Avg); err != nil {
				return err
			}
			if c.Rank() == 0 {
				mu.Lock()
				final[map[bool]string{false: "adam", true: "onebit"}[onebit]] = loss[0]
				mu.Unlock()
			}
			return nil
		})
	}
	t.Logf("final mean squared error: Adam %.3g, 1-bit Adam %.3g (start %.3g)", final["adam"], final["onebit"], float64(dim))
	// The targets are exact, so both should reach near zero from a loss of
	// about dim/2.
	if final["adam"] > 1e-3 || final["onebit"] > 1e-3 {
		t.Errorf("did not converge: Adam %.3g, 1-bit Adam %.3g", final["adam"], final["onebit"])
	}
}

func TestOnebitAdamRejectsBadInput(t *testing.T) {
	if _, err := NewOnebitAdam(nil, OnebitConfig{}, []float32{1}); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("nil comm: got %v", err)
	}
	world(t, 1, func(ctx context.Context, c *comm.Comm) error {
		if _, err := NewOnebitAdam(c, OnebitConfig{FreezeStep: -1}, []float32{1}); !errors.Is(err, comm.ErrInvalid) {
			t.Errorf("negative FreezeStep: got %v", err)
		}
		if _, err := NewOnebitAdam(c, OnebitConfig{Config: Config{Beta1: 2}}, []float32{1}); !errors.Is(err, comm.ErrInvalid) {
			t.Errorf("Beta1 2: got %v", err)
		}
		o, err := NewOnebitAdam(c, OnebitConfig{}, []float32{1})
		if err != nil {
			return err
		}
		if o.cfg.FreezeStep != DefaultFreezeStep {
			t.Errorf("FreezeStep 0 became %d, want %d", o.cfg.FreezeStep, DefaultFreezeStep)
		}
		return nil
	})
	// One rank passes a gradient of the wrong length: it gets ErrInvalid,
	// the others fail at once rather than wait for it.
	w, err := comm.NewLocalWorld(3, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, c := range w {
		wg.Go(func() {
			defer c.Close()
			o, err := NewOnebitAdam(c, OnebitConfig{FreezeStep: 1}, make([]float32, 4))
			if err != nil {
				errs[r] = err
				return
			}
			for s := range 3 {
				g := make([]float32, 4)
				if r == 1 && s == 2 {
					g = g[:3]
				}
				if errs[r] = o.Step(ctx, g); errs[r] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("a rank waited for the one that failed")
	}
	if !errors.Is(errs[1], comm.ErrInvalid) {
		t.Errorf("rank 1: got %v, want comm.ErrInvalid", errs[1])
	}
	for _, r := range []int{0, 2} {
		if errs[r] == nil {
			t.Errorf("rank %d: no error although rank 1 failed", r)
		}
	}
}
