package optim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gocomm/comm"
)

// Two steps of Adam on p = (1, -2) with gradients (0.5, 0) then (-0.25, 1),
// LR 0.1, worked by hand in float64. Plain Adam, first element:
//
//	step 1: m = 0.05, v = 0.00025; m̂ = 0.05/0.1 = 0.5, v̂ = 0.00025/0.001 = 0.25
//	        p = 1 - 0.1·0.5/(0.5+1e-8) = 0.900000002
//	step 2: m = 0.9·0.05 + 0.1·(-0.25) = 0.02
//	        v = 0.999·0.00025 + 0.001·0.0625 = 0.00031225
//	        m̂ = 0.02/0.19 = 0.1052632, v̂ = 0.00031225/0.001999 = 0.1562031, sqrt 0.3952253
//	        p = 0.9 - 0.1·0.1052632/0.3952253 = 0.873366299
//
// and the second element stays at -2 after a zero gradient, then moves by
// -LR·m̂/sqrt(v̂) with m̂ = 0.1/0.19, v̂ = 0.001/0.001999. The other cases
// differ only in where WeightDecay enters or in dropping the corrections.
func TestAdamHandComputed(t *testing.T) {
	grads := [][]float32{{0.5, 0}, {-0.25, 1}}
	for _, tc := range []struct {
		name string
		cfg  Config
		want [2][2]float64 // after step 1, after step 2
	}{
		{"plain", Config{LR: 0.1}, [2][2]float64{{0.900000002, -2}, {0.873366299, -2.074413681}}},
		{"L2 weight decay", Config{LR: 0.1, WeightDecay: 0.1}, [2][2]float64{{0.900000002, -1.900000005}, {0.854441367, -1.956191424}}},
		{"decoupled weight decay", Config{LR: 0.1, WeightDecay: 0.1, DecoupledWeightDecay: true},
			[2][2]float64{{0.890000002, -1.98}, {0.854466299, -2.034613681}}},
		{"no bias correction", Config{LR: 0.1, NoBiasCorrection: true}, [2][2]float64{{0.683772434, -2}, {0.570590131, -2.316227666}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := []float32{1, -2}
			a, err := NewAdam(tc.cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			for s, g := range grads {
				if err := a.Step(append([]float32(nil), g...)); err != nil {
					t.Fatal(err)
				}
				for i, want := range tc.want[s] {
					if math.Abs(float64(p[i])-want) > 2e-6*math.Max(1, math.Abs(want)) {
						t.Errorf("step %d: p[%d] = %.9f, want %.9f", s+1, i, p[i], want)
					}
				}
			}
			if a.Steps() != 2 {
				t.Errorf("Steps() = %d, want 2", a.Steps())
			}
		})
	}
}

// Step reads the gradients and leaves them alone.
func TestAdamKeepsGradients(t *testing.T) {
	p := []float32{1, 2, 3}
	g := []float32{0.1, -0.2, 0.3}
	a, err := NewAdam(Config{WeightDecay: 0.5}, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Step(g); err != nil {
		t.Fatal(err)
	}
	if g[0] != 0.1 || g[1] != -0.2 || g[2] != 0.3 {
		t.Errorf("gradients changed: %v", g)
	}
}

// Adam finds the minimum of an ill-conditioned quadratic, several tensors
// at once.
func TestAdamMinimizesQuadratic(t *testing.T) {
	x := []float32{3, -4}
	y := []float32{10}
	scale := []float64{1, 100}
	a, err := NewAdam(Config{LR: 0.05}, x, y)
	if err != nil {
		t.Fatal(err)
	}
	gx, gy := make([]float32, 2), make([]float32, 1)
	for range 3000 {
		for i := range x {
			gx[i] = float32(2 * scale[i] * (float64(x[i]) - 1))
		}
		gy[0] = float32(2 * (float64(y[0]) + 2))
		if err := a.Step(gx, gy); err != nil {
			t.Fatal(err)
		}
	}
	if math.Abs(float64(x[0])-1) > 1e-2 || math.Abs(float64(x[1])-1) > 1e-2 || math.Abs(float64(y[0])+2) > 1e-2 {
		t.Errorf("ended at x=%v y=%v, want (1, 1) and -2", x, y)
	}
}

func TestAdamRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{LR: -1}, "LR"},
		{Config{LR: math.NaN()}, "LR"},
		{Config{Beta1: 1}, "Beta1"},
		{Config{Beta2: -0.5}, "Beta2"},
		{Config{Eps: -1}, "Eps"},
		{Config{WeightDecay: -1}, "WeightDecay"},
	} {
		_, err := NewAdam(tc.cfg, []float32{1})
		if !errors.Is(err, comm.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want comm.ErrInvalid naming %s", tc.cfg, err, tc.want)
		}
	}
	if _, err := NewAdam(Config{}); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("no tensors: got %v", err)
	}
	a, err := NewAdam(Config{}, []float32{1, 2}, []float32{3})
	if err != nil {
		t.Fatal(err)
	}
	for _, grads := range [][][]float32{{{1, 2}}, {{1, 2}, {3, 4}}, {{1}, {3}}} {
		if err := a.Step(grads...); !errors.Is(err, comm.ErrInvalid) {
			t.Errorf("grads %v: got %v, want comm.ErrInvalid", grads, err)
		}
	}
	if a.Steps() != 0 {
		t.Errorf("a rejected step counted: Steps() = %d", a.Steps())
	}
}
