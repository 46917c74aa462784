package optim

import (
	"context"
	"fmt"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/onebit"
)

// DefaultFreezeStep is DeepSpeed's default freeze_step: the number of
// warm-up steps of exact Adam before the compression stage.
const DefaultFreezeStep = 100000

// OnebitConfig holds 1-bit Adam's hyperparameters: Adam's, and the length
// of the warm-up.
type OnebitConfig struct {
	Config
	// FreezeStep is the number of warm-up steps (DeepSpeed's freeze_step):
	// steps 1..FreezeStep are exact Adam over averaged gradients, later
	// steps compress. 0 means DefaultFreezeStep; it must not be negative.
	FreezeStep int
}

// OnebitAdam is 1-bit Adam (Tang et al., 2021) as DeepSpeed's OnebitAdam
// computes it; see the package documentation for the two stages.
//
// Like Adam it keeps the parameter slices given to NewOnebitAdam and
// updates them in place; every rank of the communicator holds its own
// OnebitAdam over its own copy of the same parameters, and calls Step in
// the same order relative to its other collectives on that communicator.
// An OnebitAdam is not safe for concurrent use, and no other collective
// may run on its communicator while Step runs.
type OnebitAdam struct {
	c      *comm.Comm
	cfg    OnebitConfig
	params [][]float32
	m, v   [][]float32
	states []*onebit.State // error feedback per tensor, from the compression stage on
	t      int
}

// NewOnebitAdam returns a 1-bit Adam over params (one slice per tensor,
// updated in place by Step) on the ranks of c (a world or a group), with
// zero moments. It rejects hyperparameters out of range.
func NewOnebitAdam(c *comm.Comm, cfg OnebitConfig, params ...[]float32) (*OnebitAdam, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: optim: NewOnebitAdam: nil communicator", comm.ErrInvalid)
	}
	if cfg.FreezeStep < 0 {
		return nil, fmt.Errorf("%w: optim: FreezeStep %d: use 0 (DeepSpeed's %d) or a positive number of warm-up steps",
			comm.ErrInvalid, cfg.FreezeStep, DefaultFreezeStep)
	}
	if cfg.FreezeStep == 0 {
		cfg.FreezeStep = DefaultFreezeStep
	}
	a, err := NewAdam(cfg.Config, params...)
	if err != nil {
		return nil, err
	}
	cfg.Config = a.cfg
	return &OnebitAdam{c: c, cfg: cfg, params: a.params, m: a.m, v: a.v}, nil
}

// Compressing reports whether the next Step is in the compression stage.
func (o *OnebitAdam) Compressing() bool { return o != nil && o.t >= o.cfg.FreezeStep }

// Steps returns the number of steps taken.
func (o *OnebitAdam) Steps() int {
	if o == nil {
		return 0
	}
	return o.t
}

// Step takes one step with this rank's local gradients, one slice per
// parameter tensor in NewOnebitAdam's order and of the same lengths. It
// communicates on the optimizer's communicator under ctx (whose log name,
// from comm.WithLogName, names the profiler's records): in the warm-up
// it averages grads in place with comm.AllReduce, so they hold the
// average afterwards; in the compression stage it reads them and leaves
// them alone. Every rank ends the step with the same parameters.
//
// Gradients that do not match the parameters are an error wrapping
// comm.ErrInvalid; then Step aborts the communicator, so that the other
// ranks fail instead of waiting for this one. An error from the
// communication leaves the ranks out of step with each other: stop
// training.
func (o *OnebitAdam) Step(ctx context.Context, grads ...[]float32) error {
	if o == nil {
		return fmt.Errorf("%w: optim: OnebitAdam.Step on a nil *OnebitAdam: make it with NewOnebitAdam (and check its error)", comm.ErrInvalid)
	}
	if err := checkGrads("OnebitAdam.Step", o.params, grads); err != nil {
		if o.c.Size() > 1 {
			o.c.Abort(err)
		}
		return err
	}
	if !o.Compressing() {
		return o.warmupStep(ctx, grads)
	}
	return o.compressedStep(ctx, grads)
}

// warmupStep is exact Adam over the averaged gradients.
func (o *OnebitAdam) warmupStep(ctx context.Context, grads [][]float32) error {
	for i, g := range grads {
		if err := comm.AllReduce(ctx, o.c, g, g, comm.Avg); err != nil {
			return fmt.Errorf("optim: OnebitAdam warm-up step %d: averaging gradient %d: %w", o.t+1, i, err)
		}
	}
	o.t++
	c := newCoefficients(o.cfg.Config, o.t, o.t)
	for i, g := range grads {
		adamStep(c, o.params[i], o.m[i], o.v[i], g)
	}
	return nil
}

// compressedStep updates the local momentum, averages it with the 1-bit
// all-reduce and moves the parameters over the frozen variance.
func (o *OnebitAdam) compressedStep(ctx context.Context, grads [][]float32) error {
	if o.states == nil {
		o.states = make([]*onebit.State, len(o.params))
		for i, p := range o.params {
			o.states[i] = onebit.NewState(len(p), o.c.Size())
		}
	}
	t := o.t + 1
	c := newCoefficients(o.cfg.Config, t, o.cfg.FreezeStep)
	for i, g := range grads {
		updateMomentum(c, o.params[i], o.m[i], g)
		if err := onebit.AllReduce(ctx, o.c, o.m[i], o.states[i]); err != nil {
			return fmt.Errorf("optim: OnebitAdam step %d: compressed all-reduce of momentum %d: %w", t, i, err)
		}
		applyUpdate(c, o.params[i], o.m[i], o.v[i])
	}
	o.t = t
	return nil
}
