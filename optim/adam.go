package optim

import (
	"fmt"
	"math"

	"github.com/gocomm/comm"
)

// Config holds Adam's hyperparameters. The zero value is torch.optim.Adam's
// defaults: a zero LR, Beta1, Beta2 or Eps takes the default below (so a
// beta of exactly 0 cannot be asked for).
type Config struct {
	// LR is the learning rate; 0 means 1e-3.
	LR float64
	// Beta1 and Beta2 are the decay rates of the running averages of the
	// gradient and of its square; 0 means 0.9 and 0.999. Each must be in
	// [0, 1).
	Beta1, Beta2 float64
	// Eps is added to the denominator; 0 means 1e-8.
	Eps float64
	// WeightDecay is the L2 penalty: torch.optim.Adam adds WeightDecay·p to
	// the gradient. With DecoupledWeightDecay the parameters shrink by
	// LR·WeightDecay·p beside the Adam step instead (torch.optim.AdamW, and
	// what DeepSpeed's OnebitAdam and FusedAdam(adam_w_mode) do).
	WeightDecay          float64
	DecoupledWeightDecay bool
	// NoBiasCorrection turns the bias correction of both moments off.
	// DeepSpeed's OnebitAdam takes bias_correction=True but never applies
	// it: NoBiasCorrection reproduces its update exactly.
	NoBiasCorrection bool
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.LR == 0 {
		c.LR = 1e-3
	}
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	return c
}

// validate reports the first hyperparameter out of range (after defaults).
func (c Config) validate() error {
	switch {
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("%w: optim: LR %v: use a finite learning rate > 0", comm.ErrInvalid, c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("%w: optim: Beta1 %v: use a value in [0, 1)", comm.ErrInvalid, c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("%w: optim: Beta2 %v: use a value in [0, 1)", comm.ErrInvalid, c.Beta2)
	case !(c.Eps > 0) || math.IsInf(c.Eps, 0):
		return fmt.Errorf("%w: optim: Eps %v: use a finite value > 0", comm.ErrInvalid, c.Eps)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0):
		return fmt.Errorf("%w: optim: WeightDecay %v: use a finite value >= 0", comm.ErrInvalid, c.WeightDecay)
	}
	return nil
}

// Adam is the Adam optimizer (Kingma and Ba) as torch.optim.Adam computes
// it, element by element in float32: with g the gradient (plus
// WeightDecay·p unless decoupled) and t the step number from 1,
//
//	m = β1·m + (1-β1)·g
//	v = β2·v + (1-β2)·g·g
//	p = p - (LR/(1-β1^t)) · m / (sqrt(v)/sqrt(1-β2^t) + Eps)
//
// (without bias correction the two corrections are 1). It is local: it
// does no communication; average the gradients first (comm.AllReduce with
// comm.Avg) for data-parallel training, or use OnebitAdam.
//
// Adam keeps the parameter slices given to NewAdam and updates them in
// place on every Step; they stay the caller's memory, which must not be
// written concurrently with Step. An Adam is not safe for concurrent use.
type Adam struct {
	cfg    Config
	params [][]float32
	m, v   [][]float32 // first and second moments, one per tensor
	t      int         // steps taken
}

// NewAdam returns an Adam over params (one slice per tensor, updated in
// place by Step), with zero moments. It rejects hyperparameters out of
// range.
func NewAdam(cfg Config, params ...[]float32) (*Adam, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("%w: optim: NewAdam: no parameter tensors: pass at least one slice", comm.ErrInvalid)
	}
	a := &Adam{cfg: cfg, params: params, m: make([][]float32, len(params)), v: make([][]float32, len(params))}
	for i, p := range params {
		a.m[i] = make([]float32, len(p))
		a.v[i] = make([]float32, len(p))
	}
	return a, nil
}

// Step applies one Adam step with grads, one slice per parameter tensor in
// NewAdam's order and of the same lengths. It reads grads and does not
// keep them.
func (a *Adam) Step(grads ...[]float32) error {
	if a == nil {
		return fmt.Errorf("%w: optim: Adam.Step on a nil *Adam: make it with NewAdam (and check its error)", comm.ErrInvalid)
	}
	if err := checkGrads("Adam.Step", a.params, grads); err != nil {
		return err
	}
	a.t++
	c := newCoefficients(a.cfg, a.t, a.t)
	for i, g := range grads {
		adamStep(c, a.params[i], a.m[i], a.v[i], g)
	}
	return nil
}

// Steps returns the number of steps taken.
func (a *Adam) Steps() int {
	if a == nil {
		return 0
	}
	return a.t
}

// StateBytes returns the bytes of optimizer state Adam holds: both
// moments, 8 bytes per parameter.
func (a *Adam) StateBytes() int64 {
	if a == nil {
		return 0
	}
	var n int64
	for i := range a.m {
		n += int64(len(a.m[i]) + len(a.v[i]))
	}
	return 4 * n
}

// checkGrads reports grads that do not match params tensor for tensor.
func checkGrads(where string, params, grads [][]float32) error {
	if len(grads) != len(params) {
		return fmt.Errorf("%w: optim: %s: %d gradient tensors for %d parameter tensors: pass one gradient per parameter tensor, in order",
			comm.ErrInvalid, where, len(grads), len(params))
	}
	for i, g := range grads {
		if len(g) != len(params[i]) {
			return fmt.Errorf("%w: optim: %s: gradient %d has %d values, its parameters %d: pass gradients laid out as the parameters",
				comm.ErrInvalid, where, i, len(g), len(params[i]))
		}
	}
	return nil
}

// coefficients are one step's float32 scalars, rounded from float64 as
// torch rounds Python floats into a float32 tensor operation.
type coefficients struct {
	beta1, oneMinusBeta1 float32
	beta2, oneMinusBeta2 float32
	stepSize             float32 // LR / (1-β1^t)
	bc2Sqrt              float32 // sqrt(1-β2^tv)
	eps                  float32
	l2                   float32 // WeightDecay added to the gradient
	shrink               float32 // LR·WeightDecay, decoupled
}

// newCoefficients computes step t's scalars; tv is the step of the second
// moment's last update (t itself unless the variance is frozen).
func newCoefficients(cfg Config, t, tv int) coefficients {
	bc1, bc2 := 1.0, 1.0
	if !cfg.NoBiasCorrection {
		bc1 = 1 - math.Pow(cfg.Beta1, float64(t))
		bc2 = 1 - math.Pow(cfg.Beta2, float64(tv))
	}
	c := coefficients{
		beta1: float32(cfg.Beta1), oneMinusBeta1: float32(1 - cfg.Beta1),
		beta2: float32(cfg.Beta2), oneMinusBeta2: float32(1 - cfg.Beta2),
		stepSize: float32(cfg.LR / bc1), bc2Sqrt: float32(math.Sqrt(bc2)),
		eps: float32(cfg.Eps),
	}
	if cfg.DecoupledWeightDecay {
		c.shrink = float32(cfg.LR * cfg.WeightDecay)
	} else {
		c.l2 = float32(cfg.WeightDecay)
	}
	return c
}

// The loops below convert every product to float32 explicitly, which keeps
// Go from fusing x*y+z into one FMA on arm64 or amd64 v3: the results are
// the same bits on every architecture.

// adamStep updates both moments with g and then p, one element at a time.
func adamStep(c coefficients, p, m, v, g []float32) {
	m, v, g = m[:len(p)], v[:len(p)], g[:len(p)] // one bounds check each
	for i := range p {
		gi := g[i]
		if c.l2 != 0 {
			gi += float32(c.l2 * p[i])
		}
		m[i] = float32(c.beta1*m[i]) + float32(c.oneMinusBeta1*gi)
		v[i] = float32(c.beta2*v[i]) + float32(float32(c.oneMinusBeta2*gi)*gi)
		p[i] = applyOne(c, p[i], m[i], v[i])
	}
}

// updateMomentum updates the first moment only (the variance is frozen),
// with the L2 term if any.
func updateMomentum(c coefficients, p, m, g []float32) {
	m, g = m[:len(p)], g[:len(p)]
	for i := range p {
		gi := g[i]
		if c.l2 != 0 {
			gi += float32(c.l2 * p[i])
		}
		m[i] = float32(c.beta1*m[i]) + float32(c.oneMinusBeta1*gi)
	}
}

// applyUpdate moves p by the Adam step of the moments m and v.
func applyUpdate(c coefficients, p, m, v []float32) {
	m, v = m[:len(p)], v[:len(p)]
	for i := range p {
		p[i] = applyOne(c, p[i], m[i], v[i])
	}
}

// applyOne is one parameter's update: decoupled decay, then the step.
func applyOne(c coefficients, p, m, v float32) float32 {
	if c.shrink != 0 {
		p -= float32(c.shrink * p)
	}
	denom := float32(float32(math.Sqrt(float64(v)))/c.bc2Sqrt) + c.eps
	return p - float32(c.stepSize*float32(m/denom))
}
