package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/launch"
	"github.com/gocomm/comm/optim"
	"github.com/gocomm/comm/profile"
)

// config is the example's command line.
type config struct {
	procs   int           // ranks to start when no launcher started us
	epochs  int           // passes over the training set
	batch   int           // samples per rank per step
	lr      float64       // learning rate (0: the optimizer's default)
	hidden  int           // units per hidden layer (0: softmax regression)
	layers  int           // hidden layers (0: softmax regression)
	samples int           // training samples (the test set is a quarter of it)
	seed    uint64        // data and initial weights
	timeout time.Duration // bound of Init and of every collective
	// optim is the optimizer; freezeStep is 1-bit Adam's warm-up.
	optim      optimizer
	freezeStep int
	// profile switches the comms logger on (summary table and straggler
	// report at the end); traceDir also writes a Perfetto trace per rank.
	// Given on the command line (flagsGiven, by flag name) they override
	// GOCOMM_PROFILE and the logger's other variables; see profileConfig.
	profile    bool
	traceDir   string
	flagsGiven map[string]bool
	// shrink is elastic without waiting for replacements at the end
	// (run under commrun -keep-going): the survivors train on.
	shrink bool
	// elastic trains under elastic.Run (see trainElastic): through the
	// loss of ranks and back up as replacements join (commrun --elastic).
	// joinWait is how long a world smaller than the job's waits for
	// replacements at the end; logSteps prints a line per step.
	elastic  bool
	joinWait time.Duration
	logSteps bool
	// reducer reduces the gradients through a ddp.Reducer, layer by layer
	// as backward produces them, in buckets of at most bucketKB KiB;
	// overlap lets a bucket start before backward has finished. Without
	// reducer the gradient is one slice, all-reduced after backward.
	reducer, overlap bool
	bucketKB         int
	// zero is the ZeRO stage (optim.Zero; 0: none).
	zero int
}

func defaultConfig() config {
	return config{procs: 4, epochs: 3, batch: 32, hidden: 512, layers: 2, samples: 8192, seed: 1, timeout: 2 * time.Minute,
		optim: optimSGD, freezeStep: 40, profile: true, reducer: true, overlap: true, bucketKB: 256, joinWait: 5 * time.Second}
}

// buckets are the Reducer's bucket caps: bucketKB, and DDP's 1 MiB first
// bucket unless bucketKB is smaller.
func (cfg config) buckets() ddp.Options {
	c := cfg.bucketKB << 10
	return ddp.Options{BucketCapBytes: c, FirstBucketCapBytes: min(c, ddp.DefaultFirstBucketCapBytes)}
}

// check reports flags that do not go together, and settles the ones that
// follow from others.
func (cfg *config) check() error {
	if cfg.shrink {
		// -shrink is -elastic that does not wait for replacements.
		cfg.elastic = true
		if !cfg.flagsGiven["join-wait"] {
			cfg.joinWait = 0
		}
	}
	switch {
	case cfg.zero < 0 || cfg.zero > 2:
		return fmt.Errorf("-zero %d: use 0 (none), 1 or 2 (ZeRO stage 3 is not offered)", cfg.zero)
	case cfg.zero > 0 && cfg.optim != optimAdam:
		return fmt.Errorf("-zero %d partitions Adam's state: use it with -optim adam, not %s", cfg.zero, cfg.optim)
	case cfg.zero > 0 && !cfg.reducer:
		return fmt.Errorf("-zero %d reduces through its own Reducer: drop -reducer=false", cfg.zero)
	case cfg.elastic && (cfg.optim != optimSGD || cfg.zero > 0):
		return fmt.Errorf("-elastic and -shrink recover -optim sgd only (its state is the parameters and the momentum), not %s", cfg.optim)
	case cfg.bucketKB <= 0:
		return fmt.Errorf("-bucket-kb %d: use a positive size", cfg.bucketKB)
	}
	if cfg.optim == optimOnebitAdam {
		// 1-bit Adam reduces the momentum, not gradients.
		cfg.reducer = false
	}
	return nil
}

// gradientString describes how gradients are reduced, for the first line.
func (cfg config) gradientString() string {
	when := "overlapped with backward"
	if !cfg.overlap {
		when = "after backward"
	}
	switch {
	case cfg.zero > 0:
		return fmt.Sprintf("ZeRO stage %d over %d KiB buckets, %s", cfg.zero, cfg.bucketKB, when)
	case cfg.reducer:
		return fmt.Sprintf("gradients reduced in %d KiB buckets, %s", cfg.bucketKB, when)
	}
	return "gradients all-reduced whole after backward"
}

// optimizer names the training's optimizer; it is a flag.Value.
type optimizer string

const (
	optimSGD        optimizer = "sgd"        // SGD with momentum 0.9, lr 0.05
	optimAdam       optimizer = "adam"       // optim.Adam, lr 1e-3
	optimOnebitAdam optimizer = "onebitadam" // optim.OnebitAdam, lr 1e-3
)

const optimNames = "sgd, adam or onebitadam"

func (o optimizer) String() string { return string(o) }

// Set accepts sgd, adam and onebitadam (also 1bitadam, onebit_adam).
func (o *optimizer) Set(s string) error {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "")) {
	case "sgd":
		*o = optimSGD
	case "adam":
		*o = optimAdam
	case "onebitadam", "1bitadam":
		*o = optimOnebitAdam
	default:
		return fmt.Errorf("unknown optimizer %q: use %s", s, optimNames)
	}
	return nil
}

// optimizerString describes the optimizer for the first line.
func (cfg config) optimizerString() string {
	switch cfg.optim {
	case optimOnebitAdam:
		return fmt.Sprintf("optimizer onebitadam (warm-up %d steps)", cfg.freezeStep)
	}
	return "optimizer " + cfg.optim.String()
}

const (
	features = 16 // input dimension
	classes  = 4
	clusters = 3   // Gaussian clusters per class: the classes are not linearly separable
	spread   = 2.0 // standard deviation of the samples around their cluster centres: the classes overlap
)

// run is the whole program: launch the ranks if no launcher did, then
// train as one of them. It returns the exit status.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	parent, err := launch.SpawnConfig(ctx, launch.Config{NProcs: cfg.procs, Stdout: stdout, Stderr: stderr, Name: "train"})
	if parent {
		if err != nil {
			fmt.Fprintln(stderr, err)
			var je *launch.JobError
			if errors.As(err, &je) {
				return je.ExitCode()
			}
			return 1
		}
		return 0
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	prof, err := cfg.profileConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	c, err := comm.Init(ctx, comm.Options{Timeout: cfg.timeout, Profile: prof})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer c.Close()
	if cfg.elastic {
		_, end, err := trainElastic(ctx, c, cfg, stdout)
		defer end.Close()
		if err != nil {
			fmt.Fprintf(stderr, "rank %d: %v\n", end.Rank(), err)
			end.Abort(err)
			return 1
		}
		return 0
	}
	if _, err := train(ctx, c, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "rank %d: %v\n", c.Rank(), err)
		c.Abort(err) // the others must not wait for this rank
		return 1
	}
	return 0
}

// dataset is a synthetic classification problem: each class is a mixture
// of Gaussian clusters in features dimensions.
type dataset struct {
	x []float32 // n*features
	y []int
}

func (d *dataset) len() int { return len(d.y) }

// makeData generates n samples deterministically from seed; every rank
// makes the same set and trains on its own shard of it.
func makeData(seed uint64, n int) (train, test dataset) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	centers := make([]float64, classes*clusters*features)
	for i := range centers {
		centers[i] = 1.6 * rng.NormFloat64()
	}
	gen := func(n int) dataset {
		d := dataset{x: make([]float32, n*features), y: make([]int, n)}
		for i := range n {
			k := rng.IntN(classes)
			c := k*clusters + rng.IntN(clusters)
			for j := range features {
				d.x[i*features+j] = float32(centers[c*features+j] + spread*rng.NormFloat64())
			}
			d.y[i] = k
		}
		return d
	}
	return gen(n), gen(n / 4)
}

// model is a multi-layer perceptron: layers hidden layers of tanh units and
// a softmax output, or softmax regression when there are none. All weights
// live in one slice so that a step needs one all-reduce. It works a batch
// at a time, layer by layer, so that each weight row is read once per batch
// rather than once per sample.
type model struct {
	dims   []int // units per layer: features, the hidden layers, classes
	params []float32
	// views into params, per layer l (from dims[l] to dims[l+1] units):
	// w[l] is dims[l+1] rows of dims[l] weights, b[l] the biases; off[l]
	// is where w[l] starts in params.
	w, b [][]float32
	off  []int
	// per-batch scratch: acts[l] holds the batch's activations of layer l
	// (acts[0] the input, the last the class probabilities); delta and
	// prev hold the gradients of a layer's pre-activations.
	acts        [][]float32
	delta, prev []float32
}

func newModel(hidden, layers int) *model {
	dims := []int{features}
	if hidden > 0 {
		for range layers {
			dims = append(dims, hidden)
		}
	}
	dims = append(dims, classes)
	n := 0
	for l := range len(dims) - 1 {
		n += dims[l+1] * (dims[l] + 1)
	}
	m := &model{dims: dims, params: make([]float32, n)}
	off := 0
	for l := range len(dims) - 1 {
		in, out := dims[l], dims[l+1]
		m.off = append(m.off, off)
		m.w = append(m.w, m.params[off:off+out*in:off+out*in])
		m.b = append(m.b, m.params[off+out*in:off+out*(in+1):off+out*(in+1)])
		off += out * (in + 1)
	}
	return m
}

func (m *model) layers() int { return len(m.dims) - 1 }

// init draws Glorot-uniform weights and zero biases.
func (m *model) init(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x243f6a8885a308d3))
	for l, w := range m.w {
		a := math.Sqrt(6 / float64(m.dims[l]+m.dims[l+1]))
		for i := range w {
			w[i] = float32(a * (2*rng.Float64() - 1))
		}
	}
}

// scratch sizes the batch buffers for n samples.
func (m *model) scratch(n int) {
	if len(m.acts) > 0 && len(m.acts[0]) == n*features {
		return
	}
	m.acts = m.acts[:0]
	widest := 0
	for _, d := range m.dims {
		m.acts = append(m.acts, make([]float32, n*d))
		widest = max(widest, d)
	}
	m.delta, m.prev = make([]float32, n*widest), make([]float32, n*widest)
}

// forward computes the class probabilities of the n samples x (n rows of
// features) into the last of m.acts.
func (m *model) forward(x []float32, n int) {
	m.scratch(n)
	copy(m.acts[0], x)
	for l := range m.layers() {
		in, out := m.dims[l], m.dims[l+1]
		a, z := m.acts[l], m.acts[l+1]
		for o := range out {
			row, bias := m.w[l][o*in:(o+1)*in], m.b[l][o]
			for s := range n {
				z[s*out+o] = bias + dot(row, a[s*in:(s+1)*in])
			}
		}
		if l < m.layers()-1 {
			for i, v := range z {
				z[i] = float32(math.Tanh(float64(v)))
			}
			continue
		}
		for s := range n {
			softmax(z[s*out : (s+1)*out])
		}
	}
}

// softmax turns logits into probabilities in place.
func softmax(p []float32) {
	top := float32(math.Inf(-1))
	for _, v := range p {
		top = max(top, v)
	}
	var z float32
	for k, v := range p {
		p[k] = float32(math.Exp(float64(v - top)))
		z += p[k]
	}
	for k := range p {
		p[k] /= z
	}
}

// score returns the summed cross-entropy of the batch forward last ran
// against labels y, and how many of its samples had y most probable.
func (m *model) score(y []int) (loss float64, correct int) {
	p := m.acts[m.layers()]
	for s, label := range y {
		ps := p[s*classes : (s+1)*classes]
		best := 0
		for k := range classes {
			if ps[k] > ps[best] {
				best = k
			}
		}
		if best == label {
			correct++
		}
		loss -= math.Log(math.Max(float64(ps[label]), 1e-12))
	}
	return loss, correct
}

// backward adds the gradient of the batch's loss against y, scaled by
// scale, to g's tensors (see tensors) and marks each layer's two ready as
// soon as they are final, so that their reduction overlaps the rest of
// backward. forward must have just run on the batch.
func (m *model) backward(ctx context.Context, y []int, scale float32, g gradients) error {
	n := len(y)
	top := m.layers()
	delta := m.delta[:n*classes]
	copy(delta, m.acts[top])
	for s, label := range y {
		delta[s*classes+label]--
	}
	for i := range delta {
		delta[i] *= scale
	}
	for l := top - 1; l >= 0; l-- {
		in, out := m.dims[l], m.dims[l+1]
		a := m.acts[l]
		gw, gb := g.Grad(2*l), g.Grad(2*l+1)
		for o := range out {
			row := gw[o*in : (o+1)*in]
			for s := range n {
				d := delta[s*out+o]
				gb[o] += d
				axpy(row, d, a[s*in:(s+1)*in])
			}
		}
		if err := g.Ready(ctx, 2*l); err != nil {
			return err
		}
		if err := g.Ready(ctx, 2*l+1); err != nil {
			return err
		}
		if l == 0 {
			break
		}
		// The gradient of layer l's activations, then of its
		// pre-activations through tanh.
		prev := m.prev[:n*in]
		clear(prev)
		for o := range out {
			w := m.w[l][o*in : (o+1)*in]
			for s := range n {
				axpy(prev[s*in:(s+1)*in], delta[s*out+o], w)
			}
		}
		for i, h := range a[:n*in] {
			prev[i] *= 1 - h*h
		}
		m.delta, m.prev = m.prev, m.delta
		delta = prev
	}
	return nil
}

// tensors returns views of x (laid out as params) per parameter tensor:
// layer l's weights are tensor 2l, its biases 2l+1.
func (m *model) tensors(x []float32) [][]float32 {
	ts := make([][]float32, 0, 2*m.layers())
	for l := range m.layers() {
		in, out := m.dims[l], m.dims[l+1]
		ts = append(ts, x[m.off[l]:m.off[l]+out*in:m.off[l]+out*in], x[m.off[l]+out*in:m.off[l]+out*(in+1):m.off[l]+out*(in+1)])
	}
	return ts
}

// gradients is where backward puts each tensor's gradient, and whom it
// tells when one is final: a ddp.Reducer, an optim.Zero, or flatGrads.
type gradients interface {
	Grad(i int) []float32
	Ready(ctx context.Context, i int) error
}

// flatGrads is the gradient as one slice laid out as the parameters; its
// tensors are views of it and Ready does nothing: the optimizer reduces
// the whole slice at once, after backward.
type flatGrads struct {
	grad  []float32
	views [][]float32
}

func newFlatGrads(m *model) *flatGrads {
	g := make([]float32, len(m.params))
	return &flatGrads{grad: g, views: m.tensors(g)}
}

func (f *flatGrads) Grad(i int) []float32 { return f.views[i] }

func (f *flatGrads) Ready(context.Context, int) error { return nil }

// deferredReady is -overlap=false: it holds back every Ready until
// backward has finished (flush), so that no communication overlaps it.
type deferredReady struct {
	gradients
	marked []int
}

func (d *deferredReady) Ready(_ context.Context, i int) error {
	d.marked = append(d.marked, i)
	return nil
}

// flush marks the gradients held back, in backward's order.
func (d *deferredReady) flush(ctx context.Context) error {
	defer func() { d.marked = d.marked[:0] }()
	for _, i := range d.marked {
		if err := d.gradients.Ready(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// dot is the inner product of a and b[:len(a)], in four running sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float32(a[i] * b[i])
		s1 += float32(a[i+1] * b[i+1])
		s2 += float32(a[i+2] * b[i+2])
		s3 += float32(a[i+3] * b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float32(a[i] * b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds alpha·x[:len(y)] to y.
func axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += float32(alpha * x[i])
	}
}

// checksum identifies the parameters bit for bit.
func checksum(p []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range p {
		u := math.Float32bits(v)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return h.Sum64()
}

// result is what train reports.
type result struct {
	loss, accuracy float64 // last epoch's training loss and the test accuracy
	testLoss       float64 // mean cross-entropy on the test set
	samplesPerSec  float64
	stepTime       time.Duration // mean of forward, backward and optimizer step
	checksum       uint64
	// stages are the bytes per step of each stage, from the profiler's
	// records (empty when the profiler is off).
	stages []stageBytes
}

// stageBytes is what the comms logger recorded for one stage of training:
// the gradient (or momentum) traffic of its steps.
type stageBytes struct {
	stage   string         // "exact" or, for 1-bit Adam, "warm-up" and "compression"
	logName string         // the log name of the stage's collectives
	steps   int            // steps taken in the stage
	bytes   int64          // sum of the records' message sizes
	ops     map[string]int // records per op
}

// perStep is the stage's bytes per step.
func (s stageBytes) perStep() float64 {
	if s.steps == 0 {
		return 0
	}
	return float64(s.bytes) / float64(s.steps)
}

func (s stageBytes) String() string {
	ops := make([]string, 0, len(s.ops))
	for op, n := range s.ops {
		ops = append(ops, fmt.Sprintf("%s x%d", op, n/max(s.steps, 1)))
	}
	slices.Sort(ops)
	return fmt.Sprintf("%s stage %.0f B (%s), %d steps", s.stage, s.perStep(), strings.Join(ops, ", "), s.steps)
}

// Log names of the per-step collectives, by stage, so that the profiler's
// records say which stage sent what.
const (
	gradLogName     = "all_reduce(avg) grads"
	momentumLogName = "onebit momentum"
)

// stepper is one optimizer step from this rank's local gradient: it
// averages the gradient (or momentum) over the ranks and moves params.
type stepper interface {
	// grads is where backward writes the step's local gradient; it is
	// zero at the start of every step.
	grads() gradients
	// logName names the collectives backward's Ready calls start.
	logName() string
	// step updates the parameters with the gradient (and leaves it zero);
	// it reports the stage the step ran in and the log name of its
	// collectives.
	step(ctx context.Context) (stage, logName string, err error)
}

// Log name of ZeRO's collectives (reduction and parameter all-gather).
const zeroLogName = "zero grads+params"

// newStepper builds the configured optimizer over the model's parameters:
// through a ddp.Reducer (or ZeRO's) unless cfg.reducer is off or the
// optimizer reduces by itself (1-bit Adam), else over one flat gradient.
func newStepper(ctx context.Context, c *comm.Comm, cfg config, m *model) (stepper, error) {
	return newStepperOver(ctx, c, cfg, m, make([]float32, len(m.params)))
}

// newStepperOver is newStepper with SGD's momentum in velocity (laid out
// as the parameters), which -elastic keeps across the steppers it builds
// for each new world.
func newStepperOver(ctx context.Context, c *comm.Comm, cfg config, m *model, velocity []float32) (stepper, error) {
	lr := cfg.lr
	if lr == 0 && cfg.optim == optimSGD {
		lr = 0.05
	}
	if cfg.zero > 0 {
		z, err := optim.NewZero(comm.WithLogName(ctx, zeroLogName), c, optim.ZeroConfig{Config: optim.Config{LR: lr}, Stage: cfg.zero, Buckets: cfg.buckets()}, m.tensors(m.params)...)
		if err != nil {
			return nil, err
		}
		return &zeroStep{z: z}, nil
	}
	if cfg.optim == optimOnebitAdam {
		o, err := optim.NewOnebitAdam(c, optim.OnebitConfig{Config: optim.Config{LR: lr}, FreezeStep: cfg.freezeStep}, m.params)
		if err != nil {
			return nil, err
		}
		return &onebitAdam{o: o, g: newFlatGrads(m)}, nil
	}
	var update func(grads [][]float32) error // over averaged gradient tensors
	switch cfg.optim {
	case optimSGD:
		s := &sgd{c: c, lr: float32(lr), params: m.params, velocity: velocity, g: newFlatGrads(m)}
		if !cfg.reducer {
			return s, nil
		}
		params, velocity := m.tensors(m.params), m.tensors(s.velocity)
		update = func(grads [][]float32) error {
			for i, g := range grads {
				sgdUpdate(s.lr, params[i], velocity[i], g)
			}
			return nil
		}
	case optimAdam:
		a, err := optim.NewAdam(optim.Config{LR: lr}, m.tensors(m.params)...)
		if err != nil {
			return nil, err
		}
		if !cfg.reducer {
			return &adam{c: c, a: a, g: newFlatGrads(m)}, nil
		}
		update = func(grads [][]float32) error { return a.Step(grads...) }
	default:
		return nil, fmt.Errorf("unknown optimizer %q: use %s", cfg.optim, optimNames)
	}
	shapes := make([][]int, 2*m.layers())
	for i, t := range m.tensors(m.params) {
		shapes[i] = []int{len(t)}
	}
	red, err := ddp.New[float32](ctx, c, shapes, cfg.buckets())
	if err != nil {
		return nil, err
	}
	return &reduced{red: red, update: update, views: make([][]float32, len(shapes))}, nil
}

// sgd is SGD with momentum 0.9 over gradients averaged by an all-reduce.
type sgd struct {
	c                *comm.Comm
	lr               float32
	params, velocity []float32
	g                *flatGrads
}

func (s *sgd) grads() gradients { return s.g }
func (s *sgd) logName() string  { return gradLogName }

func (s *sgd) step(ctx context.Context) (string, string, error) {
	grad := s.g.grad
	defer clear(grad)
	if err := comm.AllReduce(comm.WithLogName(ctx, gradLogName), s.c, grad, grad, comm.Avg); err != nil {
		return "", "", fmt.Errorf("gradient all-reduce: %w", err)
	}
	sgdUpdate(s.lr, s.params, s.velocity, grad)
	return "exact", gradLogName, nil
}

// sgdUpdate is one step of SGD with momentum 0.9.
func sgdUpdate(lr float32, params, velocity, grad []float32) {
	const momentum = 0.9
	for i, g := range grad {
		velocity[i] = momentum*velocity[i] + g
		params[i] -= lr * velocity[i]
	}
}

// adam is Adam over gradients averaged by an all-reduce.
type adam struct {
	c *comm.Comm
	a *optim.Adam
	g *flatGrads
}

func (a *adam) grads() gradients { return a.g }
func (a *adam) logName() string  { return gradLogName }

func (a *adam) step(ctx context.Context) (string, string, error) {
	defer clear(a.g.grad)
	if err := comm.AllReduce(comm.WithLogName(ctx, gradLogName), a.c, a.g.grad, a.g.grad, comm.Avg); err != nil {
		return "", "", fmt.Errorf("gradient all-reduce: %w", err)
	}
	return "exact", gradLogName, a.a.Step(a.g.views...)
}

// reduced is an optimizer over gradients a ddp.Reducer averages bucket by
// bucket while backward runs.
type reduced struct {
	red    *ddp.Reducer[float32]
	update func(grads [][]float32) error
	views  [][]float32
}

func (r *reduced) grads() gradients { return r.red }
func (r *reduced) logName() string  { return gradLogName }

func (r *reduced) step(ctx context.Context) (string, string, error) {
	// Backward's Ready started every bucket; Wait's own collective (the
	// rebuild's broadcast after the first step) is not gradient traffic.
	if err := r.red.Wait(ctx); err != nil {
		return "", "", err
	}
	for i := range r.views {
		r.views[i] = r.red.Grad(i) // the views move when the buckets are rebuilt
	}
	err := r.update(r.views)
	r.red.ZeroGrad()
	return "exact", gradLogName, err
}

// zeroStep is ZeRO (stage 1 or 2) Adam: its Reducer reduces the gradients
// while backward runs, and Step updates this rank's share and all-gathers
// the parameters.
type zeroStep struct{ z *optim.Zero }

func (z *zeroStep) grads() gradients { return z.z }
func (z *zeroStep) logName() string  { return zeroLogName }

func (z *zeroStep) step(ctx context.Context) (string, string, error) {
	return fmt.Sprintf("zero-%d", z.z.Stage()), zeroLogName, z.z.Step(comm.WithLogName(ctx, zeroLogName))
}

// onebitAdam is 1-bit Adam, which communicates by itself.
type onebitAdam struct {
	o *optim.OnebitAdam
	g *flatGrads
}

func (o *onebitAdam) grads() gradients { return o.g }
func (o *onebitAdam) logName() string  { return gradLogName }

func (o *onebitAdam) step(ctx context.Context) (string, string, error) {
	defer clear(o.g.grad)
	stage, name := "warm-up", gradLogName
	if o.o.Compressing() {
		stage, name = "compression", momentumLogName
	}
	return stage, name, o.o.Step(comm.WithLogName(ctx, name), o.g.grad)
}

// train runs data-parallel training on c: every rank computes the gradient
// of its shard of each step's batch, and the optimizer averages it (or,
// in 1-bit Adam's compression stage, the momentum) over the ranks, so
// that every rank applies the same update.
func train(ctx context.Context, c *comm.Comm, cfg config, out io.Writer) (result, error) {
	rank, size := c.Rank(), c.Size()
	say := func(format string, args ...any) {
		if rank == 0 {
			fmt.Fprintf(out, format+"\n", args...)
		}
	}
	trainSet, testSet := makeData(cfg.seed, cfg.samples)
	perRank := trainSet.len() / size // every rank takes as many steps
	steps := perRank / cfg.batch
	if steps == 0 {
		return result{}, fmt.Errorf("%d samples on %d ranks leave fewer than one batch of %d per rank: use more -samples or a smaller -batch", cfg.samples, size, cfg.batch)
	}
	if err := cfg.check(); err != nil {
		return result{}, err
	}
	m := newModel(cfg.hidden, cfg.layers)
	if rank == 0 {
		m.init(cfg.seed)
	}
	// Rank 0's initial weights reach everyone.
	if err := comm.Broadcast(comm.WithLogName(ctx, "broadcast"), c, m.params, 0); err != nil {
		return result{}, fmt.Errorf("broadcasting the initial weights: %w", err)
	}
	opt, err := newStepper(ctx, c, cfg, m)
	if err != nil {
		return result{}, err
	}
	grads := opt.grads()
	var held *deferredReady
	if !cfg.overlap {
		held = &deferredReady{gradients: grads}
		grads = held
	}
	launcher := "none"
	if env, err := comm.ReadEnvironment(nil); err == nil {
		launcher = env.Launcher.String()
	}
	say("train: %d ranks (launcher: %s), %d parameters (%s of gradient), %s, %s, %d training samples (%d per rank), %d steps of %d x %d per epoch",
		size, launcher, len(m.params), profile.ConvertSize(int64(4*len(m.params))), cfg.optimizerString(), cfg.gradientString(), trainSet.len(), perRank, steps, size, cfg.batch)

	batchX := make([]float32, cfg.batch*features)
	batchY := make([]int, cfg.batch)
	stageSteps := map[string]int{}
	var stageOrder []stageBytes
	var res result
	var elapsed time.Duration
	var trained float64        // samples of the completed epochs, all ranks
	var stepTime time.Duration // forward, backward and optimizer steps
	var optTime time.Duration  // optimizer steps: the wait for the reductions and the update
	var stepCount int
	for epoch := 1; epoch <= cfg.epochs; epoch++ {
		start := time.Now()
		sh := makeShard(cfg.seed, epoch, trainSet.len(), rank, size, cfg.batch)
		var lossSum, correct, seen float64
		for s := range sh.steps {
			for k, i := range sh.mine[s*cfg.batch : (s+1)*cfg.batch] {
				copy(batchX[k*features:(k+1)*features], trainSet.x[i*features:(i+1)*features])
				batchY[k] = trainSet.y[i]
			}
			t0 := time.Now()
			m.forward(batchX, cfg.batch)
			l, ok := m.score(batchY)
			gctx := comm.WithLogName(ctx, opt.logName())
			err := m.backward(gctx, batchY, float32(1)/float32(cfg.batch), grads)
			if err == nil && held != nil {
				err = held.flush(gctx)
			}
			stage, logName := "", ""
			t1 := time.Now()
			if err == nil {
				stage, logName, err = opt.step(ctx)
			}
			stepTime += time.Since(t0)
			optTime += time.Since(t1)
			stepCount++
			if err != nil {
				return result{}, fmt.Errorf("epoch %d step %d: %w", epoch, s, err)
			}
			lossSum += l
			correct += float64(ok)
			seen += float64(cfg.batch)
			if stageSteps[stage] == 0 {
				stageOrder = append(stageOrder, stageBytes{stage: stage, logName: logName})
			}
			stageSteps[stage]++
		}
		sums := []float64{lossSum, correct, seen}
		if err := comm.AllReduce(comm.WithLogName(ctx, "all_reduce(sum) stats"), c, sums, sums, comm.Sum); err != nil {
			return result{}, fmt.Errorf("epoch %d: metrics all-reduce: %w", epoch, err)
		}
		d := time.Since(start)
		elapsed += d
		trained += sums[2]
		res.loss = sums[0] / sums[2]
		res.samplesPerSec = sums[2] / d.Seconds()
		say("epoch %d/%d: loss %.4f  accuracy %.2f%%  %.0f samples/s", epoch, cfg.epochs, res.loss, 100*sums[1]/sums[2], res.samplesPerSec)
	}
	if elapsed > 0 {
		res.samplesPerSec = trained / elapsed.Seconds()
	}
	if err, fatal := evaluate(ctx, c, m, testSet, cfg.batch, &res); err != nil || fatal != nil {
		return res, errors.Join(err, fatal)
	}
	say("parameters identical on all %d ranks", size)
	if stepCount > 0 {
		res.stepTime = stepTime / time.Duration(stepCount)
		opt := optTime / time.Duration(stepCount)
		say("train: %.2f ms per step on rank 0: %.2f ms forward and backward, %.2f ms optimizer step (what is left of the reduction, and the update); %s",
			ms(res.stepTime), ms(res.stepTime-opt), ms(opt), cfg.gradientString())
	}
	// What each stage sent per step, as the comms logger counted it.
	if c.Profiler().Enabled() && size > 1 {
		res.stages = countStageBytes(c.Profiler().Records(), stageOrder, stageSteps)
		for _, s := range res.stages {
			say("train: bytes per step (profiler): %s", s)
		}
		if n := len(res.stages); n > 1 && res.stages[n-1].perStep() > 0 {
			say("train: the %s stage sends %.1fx fewer bytes per step than the %s stage",
				res.stages[n-1].stage, res.stages[0].perStep()/res.stages[n-1].perStep(), res.stages[0].stage)
		}
	}
	// The comms logger's table (and trace file), when profiling is on; a
	// collective, so every rank calls it and rank 0 prints.
	if err := c.Profiler().LogSummary(ctx, out, true); err != nil {
		return res, fmt.Errorf("comms summary: %w", err)
	}
	say("train: done: %d ranks, %d epochs, loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f samples/s, parameter checksum %016x",
		size, cfg.epochs, res.loss, res.testLoss, 100*res.accuracy, res.samplesPerSec, res.checksum)
	return res, nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// countStageBytes sums, per stage, the message sizes of the successful
// records carrying the stage's log name.
func countStageBytes(recs []profile.Record, stages []stageBytes, steps map[string]int) []stageBytes {
	out := make([]stageBytes, 0, len(stages))
	for _, s := range stages {
		s.steps, s.ops = steps[s.stage], map[string]int{}
		for _, r := range recs {
			if r.Err == "" && r.Name == s.logName {
				s.bytes += r.Bytes
				s.ops[r.Op]++
			}
		}
		out = append(out, s)
	}
	return out
}

// shard is one rank's share of an epoch: the same permutation on every
// rank (DistributedSampler), of which rank r takes every size-th sample.
type shard struct {
	epoch, rank, size int
	steps             int
	mine              []int
}

// epochPerm is the order of an epoch's n samples, the same on every rank.
func epochPerm(seed uint64, epoch, n int) []int {
	return rand.New(rand.NewPCG(seed, uint64(epoch))).Perm(n)
}

func makeShard(seed uint64, epoch, n, rank, size, batch int) shard {
	perm := epochPerm(seed, epoch, n)
	perRank := n / size // every rank takes as many steps
	sh := shard{epoch: epoch, rank: rank, size: size, steps: perRank / batch, mine: make([]int, 0, perRank)}
	for i := rank; i < len(perm) && len(sh.mine) < perRank; i += size {
		sh.mine = append(sh.mine, perm[i])
	}
	return sh
}

// evaluate scores the test set (each rank its share, a batch at a time)
// into res and checks that every rank has the same parameters. err is a
// collective's failure, fatal a result that no recovery changes.
func evaluate(ctx context.Context, c *comm.Comm, m *model, testSet dataset, batch int, res *result) (err, fatal error) {
	rank, size := c.Rank(), c.Size()
	batchX := make([]float32, batch*features)
	batchY := make([]int, batch)
	var testLoss, testCorrect, testN float64
	var idx []int
	for i := rank; i < testSet.len(); i += size {
		idx = append(idx, i)
	}
	for len(idx) > 0 {
		k := min(len(idx), batch)
		for j, i := range idx[:k] {
			copy(batchX[j*features:(j+1)*features], testSet.x[i*features:(i+1)*features])
			batchY[j] = testSet.y[i]
		}
		m.forward(batchX[:k*features], k)
		l, ok := m.score(batchY[:k])
		testLoss += l
		testCorrect += float64(ok)
		testN += float64(k)
		idx = idx[k:]
	}
	sums := []float64{testLoss, testCorrect, testN}
	if err := comm.AllReduce(comm.WithLogName(ctx, "all_reduce(sum) stats"), c, sums, sums, comm.Sum); err != nil {
		return fmt.Errorf("test metrics all-reduce: %w", err), nil
	}
	res.testLoss, res.accuracy = sums[0]/sums[2], sums[1]/sums[2]

	// Every rank must end with the same parameters.
	res.checksum = checksum(m.params)
	all := make([]uint64, size)
	if err := comm.AllGather(comm.WithLogName(ctx, "all_gather checksums"), c, []uint64{res.checksum}, all); err != nil {
		return fmt.Errorf("gathering parameter checksums: %w", err), nil
	}
	for r, sum := range all {
		if sum != all[0] {
			return nil, fmt.Errorf("rank %d ends with parameters %016x but rank 0 with %016x: the ranks diverged", r, sum, all[0])
		}
	}
	return nil, nil
}
