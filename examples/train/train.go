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
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/launch"
	"github.com/gocomm/comm/profile"
)

// config is the example's command line.
type config struct {
	procs   int           // ranks to start when no launcher started us
	epochs  int           // passes over the training set
	batch   int           // samples per rank per step
	lr      float64       // SGD learning rate
	hidden  int           // hidden units (0: softmax regression)
	samples int           // training samples (the test set is a quarter of it)
	seed    uint64        // data and initial weights
	timeout time.Duration // bound of Init and of every collective
	// profile switches the comms logger on (summary table and straggler
	// report at the end); traceDir also writes a Perfetto trace per rank.
	profile  bool
	traceDir string
}

func defaultConfig() config {
	return config{procs: 4, epochs: 5, batch: 32, lr: 0.05, hidden: 64, samples: 8192, seed: 1, timeout: 2 * time.Minute, profile: true}
}

const (
	features = 16 // input dimension
	classes  = 4
	clusters = 3 // Gaussian clusters per class: the classes are not linearly separable
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
	prof := &profile.Config{Enabled: cfg.profile, TraceDir: cfg.traceDir}
	if prof.TraceDir == "" {
		prof.TraceDir = os.Getenv("GOCOMM_TRACE_DIR") // commrun --trace-dir
	}
	c, err := comm.Init(ctx, comm.Options{Timeout: cfg.timeout, Profile: prof})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer c.Close()
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
				d.x[i*features+j] = float32(centers[c*features+j] + rng.NormFloat64())
			}
			d.y[i] = k
		}
		return d
	}
	return gen(n), gen(n / 4)
}

// model is a one-hidden-layer perceptron (tanh) with a softmax output, or
// softmax regression when hidden is 0. All weights live in one slice so
// that a step needs one all-reduce.
type model struct {
	hidden int
	params []float32
	// views into params
	w1, b1, w2, b2 []float32
	// per-sample scratch
	h, p []float32
}

func newModel(hidden int) *model {
	in := features
	if hidden == 0 {
		hidden, in = features, 0 // the output layer reads the input directly
	}
	n := in*hidden + hidden*boolInt(in > 0) + classes*hidden + classes
	m := &model{hidden: hidden, params: make([]float32, n), h: make([]float32, hidden), p: make([]float32, classes)}
	off := 0
	take := func(k int) []float32 { s := m.params[off : off+k : off+k]; off += k; return s }
	if in > 0 {
		m.w1, m.b1 = take(in*hidden), take(hidden)
	}
	m.w2, m.b2 = take(classes*hidden), take(classes)
	return m
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// init draws Glorot-uniform weights and zero biases.
func (m *model) init(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x243f6a8885a308d3))
	fill := func(w []float32, fanIn, fanOut int) {
		a := math.Sqrt(6 / float64(fanIn+fanOut))
		for i := range w {
			w[i] = float32(a * (2*rng.Float64() - 1))
		}
	}
	if m.w1 != nil {
		fill(m.w1, features, m.hidden)
	}
	fill(m.w2, m.hidden, classes)
}

// forward computes the class probabilities of x into m.p.
func (m *model) forward(x []float32) {
	h := x
	if m.w1 != nil {
		h = m.h
		for j := range m.hidden {
			s := m.b1[j]
			row := m.w1[j*features : (j+1)*features]
			for i, v := range x {
				s += row[i] * v
			}
			h[j] = float32(math.Tanh(float64(s)))
		}
	}
	maxLogit := float32(math.Inf(-1))
	for k := range classes {
		s := m.b2[k]
		row := m.w2[k*m.hidden : (k+1)*m.hidden]
		for j, v := range h {
			s += row[j] * v
		}
		m.p[k] = s
		maxLogit = max(maxLogit, s)
	}
	var z float32
	for k := range classes {
		m.p[k] = float32(math.Exp(float64(m.p[k] - maxLogit)))
		z += m.p[k]
	}
	for k := range classes {
		m.p[k] /= z
	}
}

// loss scores x against label y: cross-entropy, and whether the most
// probable class is y. It leaves the probabilities in m.p.
func (m *model) loss(x []float32, y int) (float64, bool) {
	m.forward(x)
	best := 0
	for k := range classes {
		if m.p[k] > m.p[best] {
			best = k
		}
	}
	return -math.Log(math.Max(float64(m.p[y]), 1e-12)), best == y
}

// backward adds the gradient of the loss of (x, y), scaled by scale, to
// grad (laid out as params). forward(x) must have just run.
func (m *model) backward(x []float32, y int, scale float32, grad []float32) {
	hidden := m.hidden
	off := 0
	var gw1, gb1 []float32
	if m.w1 != nil {
		gw1, gb1 = grad[:features*hidden], grad[features*hidden:features*hidden+hidden]
		off = features*hidden + hidden
	}
	gw2, gb2 := grad[off:off+classes*hidden], grad[off+classes*hidden:]
	h := x
	if m.w1 != nil {
		h = m.h
	}
	var dh [256]float32
	var dhs []float32 // gradient of the hidden activations (MLP only)
	if m.w1 != nil {
		if hidden <= len(dh) {
			dhs = dh[:hidden]
		} else {
			dhs = make([]float32, hidden)
		}
	}
	for k := range classes {
		d := m.p[k]
		if k == y {
			d--
		}
		d *= scale
		gb2[k] += d
		row := gw2[k*hidden : (k+1)*hidden]
		w := m.w2[k*hidden : (k+1)*hidden]
		for j, v := range h {
			row[j] += d * v
			if dhs != nil {
				dhs[j] += d * w[j]
			}
		}
	}
	if m.w1 == nil {
		return
	}
	for j := range hidden {
		d := dhs[j] * (1 - m.h[j]*m.h[j])
		gb1[j] += d
		row := gw1[j*features : (j+1)*features]
		for i, v := range x {
			row[i] += d * v
		}
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
	samplesPerSec  float64
	checksum       uint64
}

// train runs data-parallel SGD on c: every rank computes the gradient of
// its shard of each step's batch, the gradients are averaged with one
// all-reduce, and every rank applies the same update.
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
	m := newModel(cfg.hidden)
	if rank == 0 {
		m.init(cfg.seed)
	}
	// Rank 0's initial weights reach everyone.
	if err := comm.Broadcast(comm.WithLogName(ctx, "broadcast"), c, m.params, 0); err != nil {
		return result{}, fmt.Errorf("broadcasting the initial weights: %w", err)
	}
	launcher := "none"
	if env, err := comm.ReadEnvironment(nil); err == nil {
		launcher = env.Launcher.String()
	}
	say("train: %d ranks (launcher: %s), %d parameters, %d training samples (%d per rank), %d steps of %d x %d per epoch",
		size, launcher, len(m.params), trainSet.len(), perRank, steps, size, cfg.batch)

	gradCtx := comm.WithLogName(ctx, "all_reduce(avg) grads")
	grad := make([]float32, len(m.params))
	velocity := make([]float32, len(m.params))
	const momentum = 0.9
	var res result
	var elapsed time.Duration
	for epoch := 1; epoch <= cfg.epochs; epoch++ {
		start := time.Now()
		// The same permutation on every rank (DistributedSampler): rank r
		// takes every size-th sample of it.
		perm := rand.New(rand.NewPCG(cfg.seed, uint64(epoch))).Perm(trainSet.len())
		mine := make([]int, 0, perRank)
		for i := rank; i < len(perm) && len(mine) < perRank; i += size {
			mine = append(mine, perm[i])
		}
		var lossSum, correct float64
		for s := range steps {
			clear(grad)
			scale := float32(1) / float32(cfg.batch)
			for _, i := range mine[s*cfg.batch : (s+1)*cfg.batch] {
				x := trainSet.x[i*features : (i+1)*features]
				l, ok := m.loss(x, trainSet.y[i])
				lossSum += l
				if ok {
					correct++
				}
				m.backward(x, trainSet.y[i], scale, grad)
			}
			if err := comm.AllReduce(gradCtx, c, grad, grad, comm.Avg); err != nil {
				return result{}, fmt.Errorf("epoch %d step %d: gradient all-reduce: %w", epoch, s, err)
			}
			for i, g := range grad {
				velocity[i] = momentum*velocity[i] + g
				m.params[i] -= float32(cfg.lr) * velocity[i]
			}
		}
		sums := []float64{lossSum, correct, float64(steps * cfg.batch)}
		if err := comm.AllReduce(comm.WithLogName(ctx, "all_reduce(sum) stats"), c, sums, sums, comm.Sum); err != nil {
			return result{}, fmt.Errorf("epoch %d: metrics all-reduce: %w", epoch, err)
		}
		d := time.Since(start)
		elapsed += d
		res.loss = sums[0] / sums[2]
		res.samplesPerSec = sums[2] / d.Seconds()
		say("epoch %d/%d: loss %.4f  accuracy %.2f%%  %.0f samples/s", epoch, cfg.epochs, res.loss, 100*sums[1]/sums[2], res.samplesPerSec)
	}
	if elapsed > 0 {
		res.samplesPerSec = float64(cfg.epochs*steps*cfg.batch*size) / elapsed.Seconds()
	}

	// Held-out accuracy, each rank scoring its share of the test set.
	var testCorrect, testN float64
	for i := rank; i < testSet.len(); i += size {
		if _, ok := m.loss(testSet.x[i*features:(i+1)*features], testSet.y[i]); ok {
			testCorrect++
		}
		testN++
	}
	sums := []float64{testCorrect, testN}
	if err := comm.AllReduce(comm.WithLogName(ctx, "all_reduce(sum) stats"), c, sums, sums, comm.Sum); err != nil {
		return result{}, fmt.Errorf("test metrics all-reduce: %w", err)
	}
	res.accuracy = sums[0] / sums[1]

	// Every rank must end with the same parameters.
	res.checksum = checksum(m.params)
	all := make([]uint64, size)
	if err := comm.AllGather(comm.WithLogName(ctx, "all_gather checksums"), c, []uint64{res.checksum}, all); err != nil {
		return result{}, fmt.Errorf("gathering parameter checksums: %w", err)
	}
	for r, sum := range all {
		if sum != all[0] {
			return res, fmt.Errorf("rank %d ends with parameters %016x but rank 0 with %016x: the ranks diverged", r, sum, all[0])
		}
	}
	say("parameters identical on all %d ranks", size)
	// The comms logger's table (and trace file), when profiling is on; a
	// collective, so every rank calls it and rank 0 prints.
	if err := c.LogSummary(ctx, out, true); err != nil {
		return res, fmt.Errorf("comms summary: %w", err)
	}
	say("train: done: %d ranks, %d epochs, loss %.4f, test accuracy %.2f%%, %.0f samples/s, parameter checksum %016x",
		size, cfg.epochs, res.loss, 100*res.accuracy, res.samplesPerSec, res.checksum)
	return res, nil
}
