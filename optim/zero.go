package optim

import (
	"context"
	"fmt"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
)

// ZeroConfig holds a Zero optimizer's settings: Adam's hyperparameters,
// the ZeRO stage and the gradient buckets.
type ZeroConfig struct {
	Config
	// Stage is the ZeRO stage: 1 (optimizer state partitioned, gradients
	// all-reduced) or 2 (gradients reduce-scattered as well). It must be
	// given: 0 (no ZeRO) is ddp.Reducer with Adam, and stage 3
	// (parameters partitioned too) is not offered.
	Stage int
	// Buckets configure the gradient Reducer that Zero builds (bucket
	// caps, FindUnused); the zero value is DDP's defaults. KeepOrder is
	// always on: each rank's share of every bucket is fixed at NewZero,
	// and so is the layout of the optimizer state that follows it. Stage
	// 2 lends the buckets their memory from a pool (BucketBuffers; 0 means
	// 2): one bucket fills while the one before it is reduce-scattered.
	Buckets ddp.Options
}

// validate reports a stage Zero does not run.
func (c ZeroConfig) validate() error {
	switch c.Stage {
	case 1, 2:
		return nil
	case 0:
		return fmt.Errorf("%w: optim: ZeRO Stage 0: use 1 or 2 (stage 0, no partitioning, is a ddp.Reducer and Adam)", comm.ErrInvalid)
	case 3:
		return fmt.Errorf("%w: optim: ZeRO Stage 3 (parameters partitioned too) is not offered: use 1 or 2", comm.ErrInvalid)
	}
	return fmt.Errorf("%w: optim: ZeRO Stage %d: use 1 or 2", comm.ErrInvalid, c.Stage)
}

// Zero is Adam with its state partitioned across the ranks of a
// communicator, as DeepSpeed's ZeRO stages 1 and 2; see the package
// documentation for the design.
//
// Zero keeps the parameter slices given to NewZero and updates them in
// place on every Step; every rank holds all of them (only the optimizer
// state and, in stage 2, the gradients are partitioned). It owns the
// gradients: Grad(i) is gradient i's memory, a view into a bucket of its
// ddp.Reducer. Between Steps the caller fills them (backward) and marks
// each final with Ready; Step then finishes the reduction, updates this
// rank's share of the parameters and all-gathers them, so that every rank
// ends the step with the same bits. In stage 2 a bucket's memory is lent
// for the step only: fetch Grad(i) in every step, just before writing
// gradient i, and do not touch it after Ready(i).
//
// Ready may be called from several goroutines; Step and the other methods
// may not run concurrently with each other or with Ready. No other
// collective may run on the communicator while Step runs, and every rank
// must call Ready, Step and its other collectives in the same order.
type Zero struct {
	c       *comm.Comm
	cfg     ZeroConfig
	red     *ddp.Reducer[float32]
	params  [][]float32
	buckets []*zeroBucket // by bucket index
	m, v    []float32     // this rank's share of the moments, all buckets
	g       []float32     // stage 2: this rank's share of the reduced gradients
	t       int           // steps taken
	failed  error         // the communication error that put the ranks out of step
}

// zeroBucket is one Reducer bucket as Zero partitions it: every rank owns
// counts[rank] consecutive elements of it from start.
type zeroBucket struct {
	index  int
	n      int           // bucket length
	counts []int         // every rank's share
	start  int           // where this rank's share begins
	pieces []bucketPiece // where each gradient (and its parameters) lies in the bucket
	segs   []segment     // the pieces of this rank's share
	m, v   []float32     // the share's moments (views into Zero.m, Zero.v)
	g      []float32     // stage 2: the share's reduced gradient (a view into Zero.g)
	// data is the bucket's memory, as the hook last saw it: the local
	// gradients, reduced in place in stage 1 and then the staging buffer
	// of the parameters' all-gather; in stage 2 memory lent for the step.
	data []float32
}

// NewZero returns a ZeRO optimizer of the given stage over params (one
// slice per tensor, updated in place by Step) on the ranks of c (a world
// or a group), with zero moments. It is a collective: every rank of c
// calls it with tensors of the same lengths in the same order; a rank
// whose tensors differ fails every rank with an error naming the first
// difference (the Reducer's check). Every rank must start from the same
// parameters (broadcast them first); after each Step they are equal bit
// for bit.
func NewZero(ctx context.Context, c *comm.Comm, cfg ZeroConfig, params ...[]float32) (*Zero, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: optim: NewZero: nil communicator", comm.ErrInvalid)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Config = cfg.Config.withDefaults()
	if err := cfg.Config.validate(); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("%w: optim: NewZero: no parameter tensors: pass at least one slice", comm.ErrInvalid)
	}
	shapes := make([][]int, len(params))
	for i, p := range params {
		shapes[i] = []int{len(p)}
	}
	cfg.Buckets.KeepOrder = true
	if cfg.Stage == 2 && cfg.Buckets.BucketBuffers == 0 {
		cfg.Buckets.BucketBuffers = 2
	}
	red, err := ddp.New[float32](ctx, c, shapes, cfg.Buckets)
	if err != nil {
		return nil, err // it names ddp.New and what to fix
	}
	z := &Zero{c: c, cfg: cfg, red: red, params: params}
	if err := z.partition(); err != nil {
		return nil, err
	}
	if err := red.SetHook(z.hook); err != nil {
		return nil, fmt.Errorf("optim: NewZero: %w", err)
	}
	return z, nil
}

// partition gives this rank its share of every bucket and allocates the
// share's state.
func (z *Zero) partition() error {
	rank, size := z.c.Rank(), z.c.Size()
	total := 0
	for k, l := range z.red.Buckets() {
		if l.Index != k || len(l.Grads) != len(l.Offsets) {
			return fmt.Errorf("optim: ZeRO: the Reducer's bucket %d is laid out as %+v", k, l)
		}
		pieces := make([]bucketPiece, len(l.Grads))
		for j, i := range l.Grads {
			n := 0
			if i >= 0 && i < len(z.params) {
				n = len(z.params[i])
			}
			pieces[j] = bucketPiece{grad: i, off: l.Offsets[j], n: n}
		}
		if err := checkPieces(k, pieces, l.Len, z.params); err != nil {
			return err
		}
		b := &zeroBucket{index: k, n: l.Len, counts: shareCounts(l.Len, size), pieces: pieces}
		b.start = shareStart(b.counts, rank)
		b.segs = shareSegments(pieces, b.start, b.counts[rank])
		z.buckets = append(z.buckets, b)
		total += b.counts[rank]
	}
	z.m, z.v = make([]float32, total), make([]float32, total)
	if z.cfg.Stage == 2 {
		z.g = make([]float32, total)
	}
	at := 0
	for _, b := range z.buckets {
		n := b.counts[rank]
		b.m, b.v = z.m[at:at+n:at+n], z.v[at:at+n:at+n]
		if z.g != nil {
			b.g = z.g[at : at+n : at+n]
		}
		at += n
	}
	return nil
}

// hook is the Reducer's communication hook: stage 1 averages the bucket in
// place (all-reduce), stage 2 reduce-scatters it, leaving this rank's
// share of the average in its gradient share and the bucket memory as it
// was. Either way it notes the bucket's memory for Step.
func (z *Zero) hook(ctx context.Context, c *comm.Comm, b *ddp.Bucket[float32]) *comm.Work {
	if b.Index < 0 || b.Index >= len(z.buckets) || len(b.Data) != z.buckets[b.Index].n {
		// The other ranks would wait for this bucket's collective.
		err := fmt.Errorf("optim: ZeRO: the Reducer started bucket %d of %d values, not laid out at NewZero", b.Index, len(b.Data))
		c.Abort(err)
		return comm.StartFunc(func() error { return err })
	}
	zb := z.buckets[b.Index]
	zb.data = b.Data
	if z.cfg.Stage == 1 {
		return comm.StartAllReduce(ctx, c, b.Data, b.Data, comm.Avg)
	}
	return comm.StartReduceScatterV(ctx, c, b.Data, zb.g, zb.counts, comm.Avg)
}

// Grad returns gradient i's memory, a view into a bucket (nil when i is
// out of range). Backward adds or writes into it; Step leaves it zero.
func (z *Zero) Grad(i int) []float32 {
	if z == nil {
		return nil
	}
	return z.red.Grad(i)
}

// Ready marks gradient i final for this step: when its bucket is full,
// the bucket's reduction starts, overlapping the rest of backward. It
// never blocks on the network. See ddp.Reducer.Ready.
func (z *Zero) Ready(ctx context.Context, i int) error {
	if z == nil {
		return fmt.Errorf("%w: optim: Zero.Ready on a nil *Zero: make it with NewZero (and check its error)", comm.ErrInvalid)
	}
	return z.red.Ready(ctx, i)
}

// Step ends the step: it waits for every bucket's reduction (starting
// those not yet started, see ddp.Reducer.Wait), applies Adam to this
// rank's share of the parameters with its share of the state and of the
// averaged gradients, and all-gathers the parameters bucket by bucket,
// each bucket's all-gather overlapping the update of the next. Every
// rank ends it with the same parameters, and with every gradient zero.
//
// An error from Wait (a gradient not marked ready, a failed reduction)
// is returned as is; the Reducer makes it reach every rank. After a
// failed collective the ranks are out of step: Step then refuses to run,
// and training must stop.
func (z *Zero) Step(ctx context.Context) error {
	if z == nil {
		return fmt.Errorf("%w: optim: Zero.Step on a nil *Zero: make it with NewZero (and check its error)", comm.ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("%w: optim: Zero.Step: nil context: pass context.Background() or one with a deadline", comm.ErrInvalid)
	}
	if z.failed != nil {
		return fmt.Errorf("optim: Zero.Step: step %d failed before (%w): the ranks are out of step; stop training", z.t+1, z.failed)
	}
	if err := z.red.Wait(ctx); err != nil {
		z.failed = err
		return fmt.Errorf("optim: Zero step %d: %w", z.t+1, err)
	}
	t := z.t + 1
	co := newCoefficients(z.cfg.Config, t, t)
	rank := z.c.Rank()
	// Stage 1 all-gathers each bucket in its own memory; stage 2 through
	// the Reducer's spare buffers, taking turns: bucket k's all-gather
	// must end before bucket k+len(staging) reuses its buffer.
	var staging [][]float32
	if z.cfg.Stage == 2 {
		staging = z.red.Spare()
	}
	works := make([]*comm.Work, len(z.buckets))
	gathered := make([][]float32, len(z.buckets))
	var err error
	finish := func(k int) { // waits for bucket k's all-gather and copies it into the parameters
		w := works[k]
		if w == nil {
			return
		}
		works[k] = nil
		if werr := w.Wait(); werr != nil {
			if err == nil {
				err = fmt.Errorf("optim: Zero step %d: all-gathering the parameters of bucket %d: %w", t, k, werr)
			}
			return
		}
		if err != nil {
			return
		}
		for _, pc := range z.buckets[k].pieces {
			copy(z.params[pc.grad], gathered[k][pc.off:pc.off+pc.n])
		}
	}
	for k, b := range z.buckets {
		if b.n == 0 {
			continue // the Reducer starts no collective for it
		}
		if len(b.data) != b.n || (z.cfg.Stage == 2 && len(staging) == 0) {
			// The other ranks would wait for this bucket's all-gather.
			err = fmt.Errorf("optim: ZeRO: bucket %d was never reduced", b.index)
			z.c.Abort(err)
			break
		}
		buf, g := b.data, b.g
		if staging != nil {
			if k >= len(staging) {
				finish(k - len(staging))
			}
			buf = staging[k%len(staging)][:b.n]
		}
		share := buf[b.start : b.start+b.counts[rank]]
		if g == nil {
			g = share // stage 1: the average, in place
		}
		for _, s := range b.segs {
			p, end := z.params[s.grad][s.from:s.to], s.at+s.to-s.from
			adamStep(co, p, b.m[s.at:end], b.v[s.at:end], g[s.at:end])
			copy(share[s.at:end], p)
		}
		gathered[k], works[k] = buf, comm.StartAllGatherV(ctx, z.c, share, buf, b.counts)
	}
	for k := range works {
		finish(k)
	}
	if err != nil {
		z.failed = err
		return err
	}
	z.red.ZeroGrad()
	z.t = t
	return nil
}

// Steps returns the number of steps taken.
func (z *Zero) Steps() int {
	if z == nil {
		return 0
	}
	return z.t
}

// Stage returns the ZeRO stage, 1 or 2 (0 for a nil *Zero).
func (z *Zero) Stage() int {
	if z == nil {
		return 0
	}
	return z.cfg.Stage
}

// StateBytes returns the bytes of optimizer state this rank holds: its
// share of both moments, about 1/Size() of an Adam's over the same
// parameters (Adam.StateBytes). Gradient memory is GradBytes.
func (z *Zero) StateBytes() int64 {
	if z == nil {
		return 0
	}
	return 4 * int64(len(z.m)+len(z.v))
}

// GradBytes returns the bytes of gradient memory this rank holds: in
// stage 1 every gradient, in the Reducer's buckets; in stage 2 the
// buckets' pool (Buckets.BucketBuffers buffers of the longest bucket) and
// the rank's share of the averaged gradients, about 1/Size() of them.
func (z *Zero) GradBytes() int64 {
	if z == nil {
		return 0
	}
	return z.red.BucketBytes() + 4*int64(len(z.g))
}
