package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/models"
)

// The step modes of commbench ddp, on gocomm's side. Each is one
// data-parallel step over a model's gradients, float32, averaged over
// the ranks, with the gradients produced in reverse registration order
// (as a backward pass produces them).
const (
	// ModePerTensor all-reduces each gradient alone as it is produced,
	// one blocking call after another (the (a)).
	ModePerTensor = "pertensor"
	// ModeReducer marks each gradient Ready on a ddp.Reducer as it is
	// produced and Waits at the end (the (b)).
	ModeReducer = "reducer"
	// ModeFlat all-reduces one flat vector holding every gradient once
	// they all exist (the (c), the bound).
	ModeFlat = "flat"
	// ModeFlatShared is ModeFlat with the vector from comm.AllocShared
	// (every rank maps it, so a shared-memory all-reduce reads the inputs
	// in place): the bound of a Reducer whose buckets were shared memory.
	// Not in the default modes.
	ModeFlatShared = "flatshared"
	// ModeCompute is the simulated backward alone: per gradient a stretch
	// of compute proportional to its size, no communication.
	ModeCompute = "compute"
	// ModeOverlap is ModeReducer with the simulated backward: each
	// gradient is marked Ready as its layer's compute ends.
	ModeOverlap = "overlap"
)

// The modes of the Python peer (peers/ddp_bench.py): torch's
// DistributedDataParallel over gloo, and the same module's step without
// it; ModePerTensor and ModeFlat with dist.all_reduce.
const (
	ModeTorchDDP   = "ddp"
	ModeTorchPlain = "plain"
)

// Compute kinds of the simulated backward.
const (
	// ComputeSpin busy-waits on the clock: the backward runs on this
	// rank's CPU, as a CPU training loop's does.
	ComputeSpin = "spin"
	// ComputeSleep sleeps: the backward runs elsewhere (an accelerator)
	// and leaves the CPU to communication.
	ComputeSleep = "sleep"
)

// DDPRankConfig is what one gocomm job of commbench ddp runs: every rank
// calls RunDDP with the same config.
type DDPRankConfig struct {
	Model  models.Model
	Modes  []string // among ModePerTensor, ModeReducer, ModeFlat, run in this order
	Warmup int      // untimed steps per mode
	Iters  int      // timed steps per mode
	Check  bool     // verify one step's reduced gradients per mode
	// Overlap adds ModeCompute and ModeOverlap after Modes, with a
	// backward whose total is ComputeFactor times this job's ModeFlat
	// step (measured first if Modes lacks it).
	Overlap       bool
	ComputeFactor float64
	ComputeKind   string
	// OverlapFirst runs ModeOverlap before ModeCompute (commbench ddp
	// alternates it from run to run).
	OverlapFirst bool
}

// DDPSample is what one job measured for one mode: the slowest rank's
// step times (seconds), the timed loop per step, and the check.
type DDPSample struct {
	Mode  string
	Times []float64
	Loop  float64
	Wrong int64 // -1: not checked
	// Compute is the backward's planned total (ModeCompute, ModeOverlap),
	// seconds.
	Compute float64
}

// gradReducer is the part of ddp.Reducer[float32] the benchmark drives.
type gradReducer interface {
	Grad(i int) []float32
	Ready(ctx context.Context, i int) error
	Wait(ctx context.Context) error
}

var _ gradReducer = (*ddp.Reducer[float32])(nil)

// newGradReducer builds the Reducer of ModeReducer and ModeOverlap: DDP's
// defaults (25 MiB buckets, the first 1 MiB, rebuilt after the first
// step, averaging).
func newGradReducer(ctx context.Context, c *comm.Comm, shapes [][]int) (gradReducer, error) {
	return ddp.New[float32](ctx, c, shapes, ddp.Options{})
}

// RunDDP runs cfg on c. Rank 0 returns one sample per mode; the others
// return nil.
func RunDDP(ctx context.Context, c *comm.Comm, cfg DDPRankConfig) ([]DDPSample, error) {
	modes := slices.Clone(cfg.Modes)
	flatAt := slices.Index(modes, ModeFlat)
	if cfg.Overlap && flatAt < 0 {
		modes = append([]string{ModeFlat}, modes...) // the backward's length comes from it
		flatAt = 0
	}
	var samples []DDPSample
	var flat float64
	for i, mode := range modes {
		s, err := runDDPMode(ctx, c, cfg, mode, nil)
		if err != nil {
			return nil, err
		}
		if i == flatAt {
			flat = s.Loop
		}
		samples = append(samples, s)
	}
	if cfg.Overlap {
		plan := backwardPlan(cfg.Model, time.Duration(cfg.ComputeFactor*flat*float64(time.Second)))
		order := []string{ModeCompute, ModeOverlap}
		if cfg.OverlapFirst {
			order = []string{ModeOverlap, ModeCompute}
		}
		for _, mode := range order {
			s, err := runDDPMode(ctx, c, cfg, mode, plan)
			if err != nil {
				return nil, err
			}
			samples = append(samples, s)
		}
	}
	if c.Rank() != 0 {
		return nil, nil
	}
	return samples, nil
}

// backwardPlan gives each gradient a share of total proportional to its
// size: ends[i] is when gradient i's layer finishes, counted from the
// start of the backward, which runs from the last gradient to the first.
func backwardPlan(m models.Model, total time.Duration) []time.Duration {
	ends := make([]time.Duration, len(m.Tensors))
	all := float64(m.Params())
	var done float64
	for i := len(m.Tensors) - 1; i >= 0; i-- {
		done += float64(m.Tensors[i].Numel())
		ends[i] = time.Duration(float64(total) * done / all)
	}
	return ends
}

// waitUntil spins or sleeps until t.
func waitUntil(t time.Time, kind string) {
	if kind == ComputeSleep {
		time.Sleep(time.Until(t))
		return
	}
	for time.Now().Before(t) {
	}
}

// ddpStep is one mode's state on one rank: its gradients and its step.
type ddpStep struct {
	grads []([]float32)                 // gradient i, as the step sees it
	step  func(layer func(i int)) error // one step; layer(i), when not nil, is gradient i's compute
	fetch func()                        // refresh grads (the Reducer's views move when it rebuilds buckets)
	free  func()                        // release what the mode allocated outside Go's heap
}

// newDDPStep sets up mode on this rank.
func newDDPStep(ctx context.Context, c *comm.Comm, m models.Model, mode string) (*ddpStep, error) {
	n := len(m.Tensors)
	s := &ddpStep{grads: make([][]float32, n), fetch: func() {}, free: func() {}}
	backward := func(layer func(int), each func(i int) error) error {
		for i := n - 1; i >= 0; i-- {
			if layer != nil {
				layer(i)
			}
			if each != nil {
				if err := each(i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	switch mode {
	case ModePerTensor:
		for i, t := range m.Tensors {
			s.grads[i] = make([]float32, t.Numel())
		}
		s.step = func(layer func(int)) error {
			return backward(layer, func(i int) error { return comm.AllReduce(ctx, c, s.grads[i], s.grads[i], comm.Avg) })
		}
	case ModeFlat, ModeFlatShared:
		flat := make([]float32, m.Params())
		if mode == ModeFlatShared {
			var err error
			if flat, err = comm.AllocShared[float32](ctx, c, m.Params()); err != nil {
				return nil, fmt.Errorf("commbench ddp: %w", err)
			}
			s.free = func() { comm.FreeShared(c, flat) }
		}
		off := 0
		for i, t := range m.Tensors {
			s.grads[i] = flat[off : off+t.Numel() : off+t.Numel()]
			off += t.Numel()
		}
		s.step = func(layer func(int)) error {
			if err := backward(layer, nil); err != nil {
				return err
			}
			return comm.AllReduce(ctx, c, flat, flat, comm.Avg)
		}
	case ModeCompute:
		s.step = func(layer func(int)) error { return backward(layer, nil) }
	case ModeReducer, ModeOverlap:
		r, err := newGradReducer(ctx, c, m.Shapes())
		if err != nil {
			return nil, fmt.Errorf("commbench ddp: %w", err)
		}
		s.fetch = func() {
			for i := range s.grads {
				s.grads[i] = r.Grad(i)
			}
		}
		s.fetch()
		s.step = func(layer func(int)) error {
			if err := backward(layer, func(i int) error { return r.Ready(ctx, i) }); err != nil {
				return err
			}
			return r.Wait(ctx)
		}
	default:
		return nil, fmt.Errorf("commbench ddp: unknown mode %q", mode)
	}
	return s, nil
}

// runDDPMode times one mode: its buffers are made and touched, then
// warm-ups, then the timed steps back to back (each the slowest rank's),
// then with cfg.Check one step on known gradients, verified. ends, when
// not nil, is the simulated backward (backwardPlan).
func runDDPMode(ctx context.Context, c *comm.Comm, cfg DDPRankConfig, mode string, ends []time.Duration) (DDPSample, error) {
	fail := func(what string, err error) (DDPSample, error) {
		return DDPSample{}, fmt.Errorf("commbench ddp: %s, %s, %s: %w", cfg.Model.Name, mode, what, err)
	}
	// The previous mode's gradients go before this one's arrive: BERT's
	// are 438 MB a copy.
	runtime.GC()
	s, err := newDDPStep(ctx, c, cfg.Model, mode)
	if err != nil {
		return DDPSample{}, err
	}
	defer s.free()
	me, n := c.Rank(), c.Size()
	for _, g := range s.grads {
		fillGrad(g, me, 0)
	}
	var layer func(int)
	var t0 time.Time
	if ends != nil {
		layer = func(i int) {
			if i == len(ends)-1 {
				t0 = time.Now()
			}
			waitUntil(t0.Add(ends[i]), cfg.ComputeKind)
		}
	}
	if err := comm.Barrier(ctx, c); err != nil {
		return fail("barrier", err)
	}
	for range cfg.Warmup {
		if err := s.step(layer); err != nil {
			return fail("warm-up", err)
		}
	}
	ts := make([]float64, cfg.Iters)
	l0 := time.Now()
	var prev time.Duration
	for it := range ts {
		if err := s.step(layer); err != nil {
			return fail("timed step", err)
		}
		now := time.Since(l0)
		ts[it] = (now - prev).Seconds()
		prev = now
	}
	loop := []float64{prev.Seconds() / float64(max(len(ts), 1))}
	if err := comm.AllReduce(ctx, c, ts, ts, comm.Max); err != nil {
		return fail("combining times", err)
	}
	if err := comm.AllReduce(ctx, c, loop, loop, comm.Max); err != nil {
		return fail("combining loop times", err)
	}
	wrong := []int64{-1}
	if cfg.Check && mode != ModeCompute {
		s.fetch()
		for _, g := range s.grads {
			fillGrad(g, me, 1)
		}
		if err := s.step(nil); err != nil {
			return fail("check step", err)
		}
		s.fetch()
		wrong[0] = 0
		for _, g := range s.grads {
			wrong[0] += countWrongGrad(g, n)
		}
		if err := comm.AllReduce(ctx, c, wrong, wrong, comm.Sum); err != nil {
			return fail("combining check counts", err)
		}
	}
	var compute float64
	if ends != nil {
		compute = ends[0].Seconds()
	}
	return DDPSample{Mode: mode, Times: ts, Loop: loop[0], Wrong: wrong[0], Compute: compute}, nil
}

// fillGrad writes a rank's gradient values: small integers, so that
// their average over 2 or 4 ranks is exact in float32. salt varies them
// between the timed steps and the check.
func fillGrad(g []float32, rank, salt int) {
	for j := range g {
		g[j] = float32((j+salt)%7 + rank)
	}
}

// countWrongGrad counts the elements of g that are not the average over
// n ranks of fillGrad's values with salt 1.
func countWrongGrad(g []float32, n int) int64 {
	var w int64
	half := float64(n-1) / 2
	for j, v := range g {
		want := float64((j+1)%7) + half
		if math.Abs(float64(v)-want) > 1e-5*math.Max(1, want) {
			w++
		}
	}
	return w
}
