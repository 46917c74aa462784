package ddp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocomm/comm"
)

// Default bucket caps, DDP's: bucket_cap_mb=25 and the 1 MiB first bucket
// that lets the first collective start early in backward.
const (
	DefaultBucketCapBytes      = 25 << 20
	DefaultFirstBucketCapBytes = 1 << 20
)

// Errors returned by this package; match them with errors.Is. Bad
// arguments wrap comm.ErrInvalid.
var (
	// ErrMismatch is returned by New, on every rank, when the ranks
	// registered different gradients (count, shapes, element type) or
	// options; the message names the first difference and the ranks on
	// each side.
	ErrMismatch = errors.New("comm: ddp: ranks registered different gradients")
	// ErrUnused is returned by Wait when gradients were not marked ready
	// in a synced step and Options.FindUnused is off: on the rank that
	// did not mark them, naming them, and on the others, which that rank
	// aborts so that they do not wait for collectives it cannot start.
	ErrUnused = errors.New("comm: ddp: gradients not marked ready")
)

// Options configure a Reducer. The zero value is DDP's defaults.
type Options struct {
	// BucketCapBytes caps a bucket's size (DDP's bucket_cap_mb); 0 is
	// DefaultBucketCapBytes. A gradient larger than the cap is a bucket
	// of its own.
	BucketCapBytes int
	// FirstBucketCapBytes caps the first bucket, which is started first;
	// 0 is DefaultFirstBucketCapBytes.
	FirstBucketCapBytes int
	// FindUnused reduces gradients that were not marked ready in a synced
	// step as zeros (DDP's find_unused_parameters); without it, such a
	// gradient is an error on every rank.
	FindUnused bool
	// KeepOrder keeps the buckets New builds instead of rebuilding them
	// after the first synced step from the order gradients became ready.
	KeepOrder bool
	// BucketBuffers, when positive, lends the buckets their memory from a
	// pool of buffers (each as long as the longest bucket) instead of
	// giving every bucket its own, so that gradient memory is a few
	// buckets rather than the whole model, as in DeepSpeed's ZeRO stage 2.
	// A bucket borrows a buffer, zeroed, when Grad first asks for one of
	// its gradients in a step (or when it starts, if none did), and gives
	// it back once its reduction is done. The pool makes up to
	// BucketBuffers buffers; beyond that Grad waits for the first bucket
	// being reduced to finish, or, when every buffer is held by a bucket
	// still filling (gradients arriving far from bucket order), makes one
	// more rather than wait for buckets that cannot fill (Wait lets the
	// extra ones go).
	//
	// The values then last only from Grad to the end of the bucket's
	// reduction: the hook must leave its result elsewhere (optim's ZeRO
	// stage 2 reduce-scatters each bucket into the rank's share), Grad(i)
	// must be fetched anew in every step before gradient i is written, and
	// SetSync(false) (accumulating between steps) is refused.
	BucketBuffers int
}

// Hook is a communication hook (DDP's register_comm_hook): given a full
// bucket, it starts the bucket's reduction across the ranks of c and
// returns its Work. When the Work is done, b.Data holds the reduced
// gradients (averaged, by the hooks of this package), or, for a hook that
// keeps its result elsewhere (optim's ZeRO stage 2 reduce-scatters each
// bucket into the rank's share), whatever that hook's caller expects: the
// Reducer does not touch bucket memory after the hook's Work is done,
// except to move the values once when it rebuilds its buckets after the
// first synced step (Options.KeepOrder turns that off, as ZeRO does). b.Data is the local sum, in
// bucket memory; it belongs to the Work until it is done. b is the
// Reducer's: do not modify its Layout's slices or keep b after the Work.
//
// The Reducer calls its hook for buckets 0, 1, 2... in that order, one
// call at a time, from the goroutine whose Ready (or Wait) completed the
// bucket. Ready does not wait for the network, so a hook must not either:
// it starts its collectives on c before it returns, in call order, or, if
// its Work issues them from a goroutine of its own (comm.StartFunc),
// after the previous bucket's Work is done (as OnebitHook and HookFunc
// do), so that every rank issues the same collectives in the same order.
type Hook[T comm.Numeric] func(ctx context.Context, c *comm.Comm, b *Bucket[T]) *comm.Work

// Bucket is what a hook gets: the bucket's layout and its memory.
type Bucket[T comm.Numeric] struct {
	Layout
	// Data is the bucket's memory: its gradients' views, side by side.
	Data []T
}

// Step modes, latched when a step starts.
const (
	stepIdle   int32 = iota // no Ready since the last Wait
	stepSynced              // gradients are reduced at this step
	stepLocal               // no_sync: gradients accumulate locally
)

// Reducer is DDP's reducer for gradients of element type T: it owns their
// memory, grouped into buckets, and all-reduces each bucket (through its
// hook) as soon as its gradients are ready, in bucket order.
//
// A step is: write each gradient into Grad(i) (assign, or add to
// accumulate), call Ready(ctx, i) for it, then Wait(ctx). Ready may be
// called from several goroutines at once; Wait must be called once every
// Ready of the step has returned, and the other methods between steps.
// Between a step's first Ready and its Wait the Reducer's collectives
// start at times that differ by rank: start no other collective on its
// communicator then.
type Reducer[T comm.Numeric] struct {
	c      *comm.Comm
	opts   Options
	shapes [][]int
	numel  []int

	// The layout: replaced only by the rebuild, in Wait.
	flat     []T
	buckets  []Bucket[T]
	views    [][]T
	bucketOf []int
	epoch    int
	rebuilt  bool
	hook     Hook[T]

	// Per step. marked is set by Ready; used (read and written by Wait
	// only) remembers the gradients marked since the last synced step,
	// whose accumulated values are reduced even if not marked again.
	marked   []atomic.Bool
	used     []bool
	pending  []atomic.Int32 // per bucket: gradients not yet marked
	works    []*comm.Work   // per bucket: its reduction, once started
	order    []int32        // gradients in the order they were marked
	orderN   atomic.Int32
	mode     atomic.Int32 // stepIdle, stepSynced or stepLocal
	wantSync atomic.Bool
	steps    int // steps ended by Wait

	failed atomic.Pointer[error] // an earlier step's failure: the Reducer is unusable

	mu   sync.Mutex // protects following
	next int        // the next bucket to start

	// The pool of Options.BucketBuffers: buffers of bufLen elements;
	// held[k] is the one bucket k holds (nil: none; its Data and its
	// gradients' views are nil then). With a pool, views are under mu.
	bufLen int
	free   [][]T
	held   [][]T
	made   int // buffers made, held or free
}

// New builds a Reducer for gradients of the given shapes (one per
// gradient, in registration order: the order a model declares its
// parameters; a shape with no dimensions is a scalar) over c.
//
// New is collective: every rank of c calls it with the same shapes,
// element type and Options, and it checks that they do with one
// all-gather of a digest. When they do not, it returns an error wrapping
// ErrMismatch on every rank, naming the first gradient (index and shape
// on each rank) or option that differs and the ranks that differ. An
// invalid argument on one rank (a negative dimension, no gradients, a
// negative cap) fails every rank the same way; a nil ctx or c fails only
// the calling rank.
//
// Buckets are filled in reverse registration order, since backward makes
// the gradients of the last layers first. The gradients start at zero.
func New[T comm.Numeric](ctx context.Context, c *comm.Comm, shapes [][]int, opts Options) (*Reducer[T], error) {
	switch {
	case ctx == nil:
		return nil, fmt.Errorf("%w: ddp.New: nil context: pass context.Background() or one with a deadline", comm.ErrInvalid)
	case c == nil:
		return nil, fmt.Errorf("%w: ddp.New: nil *comm.Comm: pass a communicator from comm.Init or comm.NewLocalWorld", comm.ErrInvalid)
	case !c.IsMember():
		return nil, fmt.Errorf("%w: ddp.New: this rank is not a member of the group", comm.ErrInvalid)
	}
	if opts.BucketCapBytes == 0 {
		opts.BucketCapBytes = DefaultBucketCapBytes
	}
	if opts.FirstBucketCapBytes == 0 {
		opts.FirstBucketCapBytes = DefaultFirstBucketCapBytes
	}
	elemSize := int(unsafe.Sizeof(*new(T)))
	reg := &registration{
		DType:               dtypeName[T](),
		BucketCapBytes:      opts.BucketCapBytes,
		FirstBucketCapBytes: opts.FirstBucketCapBytes,
		FindUnused:          opts.FindUnused,
		KeepOrder:           opts.KeepOrder,
		BucketBuffers:       opts.BucketBuffers,
		Shapes:              make([][]int, len(shapes)),
	}
	for i, s := range shapes {
		reg.Shapes[i] = append([]int{}, s...)
	}
	invalid := reg.validate(elemSize)
	if err := agree(ctx, c, reg, elemSize); err != nil {
		return nil, err
	}
	if invalid != nil {
		return nil, fmt.Errorf("%w: ddp.New: %v", comm.ErrInvalid, invalid)
	}
	n := len(reg.Shapes)
	r := &Reducer[T]{
		c:        c,
		opts:     opts,
		shapes:   reg.Shapes,
		numel:    make([]int, n),
		views:    make([][]T, n),
		bucketOf: make([]int, n),
		marked:   make([]atomic.Bool, n),
		used:     make([]bool, n),
		order:    make([]int32, n),
		hook:     AllReduceHook[T](),
	}
	for i, s := range r.shapes {
		r.numel[i], _ = numelOf(s, elemSize)
	}
	r.wantSync.Store(true)
	r.layOut(assignBuckets(defaultOrder(n), r.numel, elemSize, opts.FirstBucketCapBytes, opts.BucketCapBytes))
	return r, nil
}

// layOut makes groups the buckets, in fresh memory into which the current
// gradients (if any) are copied, and resets the per-bucket step state.
func (r *Reducer[T]) layOut(groups [][]int) {
	ls := layouts(groups, r.numel, r.epoch)
	if r.opts.BucketBuffers > 0 {
		r.layOutPooled(ls)
		return
	}
	total := 0
	for _, l := range ls {
		total += l.Len
	}
	flat := make([]T, total)
	buckets := make([]Bucket[T], len(ls))
	off := 0
	for k, l := range ls {
		data := flat[off : off+l.Len : off+l.Len]
		buckets[k] = Bucket[T]{Layout: l, Data: data}
		for j, g := range l.Grads {
			lo := l.Offsets[j]
			v := data[lo : lo+r.numel[g] : lo+r.numel[g]]
			copy(v, r.views[g])
			r.views[g] = v
			r.bucketOf[g] = k
		}
		off += l.Len
	}
	r.flat, r.buckets = flat, buckets
	r.pending = make([]atomic.Int32, len(buckets))
	r.works = make([]*comm.Work, len(buckets))
	r.resetStep()
}

// layOutPooled is layOut for pooled bucket memory: no bucket holds a
// buffer until it is lent one (every buffer is back in the pool when the
// buckets are laid out), and the buffers are as long as the longest
// bucket. A bucket of no elements holds an empty slice for good.
func (r *Reducer[T]) layOutPooled(ls []Layout) {
	longest := 0
	buckets := make([]Bucket[T], len(ls))
	for k, l := range ls {
		longest = max(longest, l.Len)
		buckets[k] = Bucket[T]{Layout: l}
		if l.Len == 0 {
			buckets[k].Data = []T{}
		}
		for _, g := range l.Grads {
			r.bucketOf[g] = k
			r.views[g] = buckets[k].Data
		}
	}
	if longest != r.bufLen {
		r.free, r.made, r.bufLen = nil, 0, longest
	}
	r.buckets, r.held = buckets, make([][]T, len(ls))
	r.pending = make([]atomic.Int32, len(buckets))
	r.works = make([]*comm.Work, len(buckets))
	r.resetStep()
}

// lend gives bucket k (which holds no buffer) a zeroed buffer from the
// pool. When none is free it takes back the buffers of buckets whose
// reductions are done; failing that it makes one, up to
// Options.BucketBuffers, or, if mayWait and a bucket being reduced holds
// one, waits for the first such reduction to end (with r.mu unlocked);
// otherwise it makes one more, so that it never waits for buckets that
// have yet to fill. It returns with r.mu held.
func (r *Reducer[T]) lend(k int, mayWait bool) {
	for len(r.free) == 0 {
		if r.reclaim() > 0 {
			break
		}
		w := r.firstInFlight()
		if r.made < r.opts.BucketBuffers || !mayWait || w == nil {
			r.free = append(r.free, make([]T, r.bufLen))
			r.made++
			break
		}
		r.mu.Unlock()
		<-w.Done()
		r.mu.Lock()
		if r.held[k] != nil {
			return // another goroutine's Grad lent it one meanwhile
		}
	}
	buf := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	b := &r.buckets[k]
	data := buf[:b.Len:b.Len]
	clear(data)
	r.held[k], b.Data = buf, data
	for j, g := range b.Grads {
		lo := b.Offsets[j]
		r.views[g] = data[lo : lo+r.numel[g] : lo+r.numel[g]]
	}
}

// reclaim takes back the buffers of the buckets started in this step
// whose reductions are done, and returns how many. r.mu must be held.
func (r *Reducer[T]) reclaim() int {
	n := 0
	for k := range r.next {
		if w := r.works[k]; w != nil && r.held[k] != nil && done(w) {
			r.giveBack(k)
			n++
		}
	}
	return n
}

// firstInFlight is the Work of the first bucket started in this step that
// still holds its buffer, or nil. r.mu must be held.
func (r *Reducer[T]) firstInFlight() *comm.Work {
	for k := range r.next {
		if r.works[k] != nil && r.held[k] != nil {
			return r.works[k]
		}
	}
	return nil
}

// giveBack returns bucket k's buffer to the pool. r.mu must be held.
func (r *Reducer[T]) giveBack(k int) {
	r.free = append(r.free, r.held[k])
	r.held[k], r.buckets[k].Data = nil, nil
	for _, g := range r.buckets[k].Grads {
		r.views[g] = nil
	}
}

// done reports whether w has ended.
func done(w *comm.Work) bool {
	select {
	case <-w.Done():
		return true
	default:
		return false
	}
}

// Spare returns the pool's buffers (Options.BucketBuffers of them, each
// as long as the longest bucket), for use as scratch memory between
// steps: after Wait and until the next Grad or Ready, which lend them to
// buckets again (zeroed). optim's ZeRO stage 2 all-gathers the updated
// parameters through them. It returns nil without BucketBuffers, and
// during a step.
func (r *Reducer[T]) Spare() [][]T {
	if r == nil || r.opts.BucketBuffers == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode.Load() != stepIdle || slices.ContainsFunc(r.held, func(b []T) bool { return b != nil }) {
		return nil
	}
	for r.made < r.opts.BucketBuffers {
		r.free = append(r.free, make([]T, r.bufLen))
		r.made++
	}
	return slices.Clone(r.free)
}

// BucketBytes is the bucket memory the Reducer holds, in bytes: every
// bucket's, or with Options.BucketBuffers the pool's buffers made so far.
func (r *Reducer[T]) BucketBytes() int64 {
	if r == nil {
		return 0
	}
	size := int64(unsafe.Sizeof(*new(T)))
	if r.opts.BucketBuffers == 0 {
		return size * int64(len(r.flat))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return size * int64(r.made) * int64(r.bufLen)
}

// resetStep makes the Reducer ready for the next step.
func (r *Reducer[T]) resetStep() {
	for i := range r.marked {
		r.marked[i].Store(false)
	}
	for k := range r.buckets {
		r.pending[k].Store(int32(len(r.buckets[k].Grads)))
		r.works[k] = nil
	}
	r.next = 0
	r.orderN.Store(0)
	r.mode.Store(stepIdle)
}

// Grad returns gradient i: a view of its place in bucket memory, with the
// gradient's element count as length and capacity (nil if i is out of
// range). Writing it writes the bucket; after Wait it holds the reduced
// gradient. The view belongs to the Reducer's collectives from Ready(i)
// until Wait returns. The rebuild after the first synced step moves every
// gradient (with its values) to new memory: fetch Grad(i) again after
// that Wait, or simply every step.
//
// With Options.BucketBuffers, Grad lends gradient i's bucket a zeroed
// buffer if it holds none, waiting for a bucket being reduced to give
// its back when the pool is spent; once the bucket's reduction has
// started in this step, Grad returns its view until the buffer is given
// back, then nil. After Wait the views hold nothing; call Grad again
// before writing in the next step.
func (r *Reducer[T]) Grad(i int) []T {
	if r == nil || i < 0 || i >= len(r.views) {
		return nil
	}
	if r.opts.BucketBuffers == 0 {
		return r.views[i]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.bucketOf[i]
	started := r.mode.Load() == stepSynced && k < r.next
	if r.buckets[k].Data == nil && !started {
		r.lend(k, true)
	}
	return r.views[i]
}

// Shape returns the shape gradient i was registered with (nil if i is out
// of range). The slice is the Reducer's: do not modify it.
func (r *Reducer[T]) Shape(i int) []int {
	if r == nil || i < 0 || i >= len(r.shapes) {
		return nil
	}
	return r.shapes[i]
}

// Len is the number of gradients.
func (r *Reducer[T]) Len() int {
	if r == nil {
		return 0
	}
	return len(r.shapes)
}

// Buckets describes the current buckets, in the order they are started.
// The layouts change when the buckets are rebuilt (see Layout.Epoch).
func (r *Reducer[T]) Buckets() []Layout {
	if r == nil {
		return nil
	}
	ls := make([]Layout, len(r.buckets))
	for k := range r.buckets {
		l := r.buckets[k].Layout
		l.Grads = append([]int{}, l.Grads...)
		l.Offsets = append([]int{}, l.Offsets...)
		ls[k] = l
	}
	return ls
}

// SetHook replaces the hook that reduces buckets (AllReduceHook by
// default). Call it between steps; every rank must use the same hook.
func (r *Reducer[T]) SetHook(h Hook[T]) error {
	if err := r.unusable(); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("%w: ddp: SetHook(nil): pass a hook, e.g. AllReduceHook", comm.ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode.Load() != stepIdle {
		return fmt.Errorf("%w: ddp: SetHook during a step: call it before the step's first Ready or after its Wait", comm.ErrInvalid)
	}
	r.hook = h
	return nil
}

// SetSync turns communication on (the default) or off. Off is DDP's
// no_sync: Ready and Wait send nothing and gradients keep accumulating in
// bucket memory (add each step's gradient to Grad(i)); the next synced
// step reduces the sum. The setting takes effect at the next step that
// has not started (a step starts with its first Ready). Every rank must
// make the same choice for a step.
func (r *Reducer[T]) SetSync(on bool) {
	if r != nil {
		r.wantSync.Store(on)
	}
}

// ZeroGrad sets every gradient to zero. Call it between steps. (Pooled
// bucket memory is zeroed when it is lent.)
func (r *Reducer[T]) ZeroGrad() {
	if r != nil {
		clear(r.flat)
	}
}

// errPooledNoSync is the error of a step with SetSync(false) on pooled
// bucket memory.
var errPooledNoSync = fmt.Errorf("%w: ddp: SetSync(false) with Options.BucketBuffers: pooled buckets keep no gradients between steps; accumulate in memory of your own, or leave BucketBuffers 0", comm.ErrInvalid)

// startStep latches the step's mode on its first Ready or Wait and
// returns it.
func (r *Reducer[T]) startStep() int32 {
	if m := r.mode.Load(); m != stepIdle {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mode.Load()
	if m == stepIdle {
		m = stepLocal
		if r.wantSync.Load() {
			m = stepSynced
		}
		r.mode.Store(m)
	}
	return m
}

// unusable is the error of a call on a Reducer New did not make or after
// a failed step, or nil.
func (r *Reducer[T]) unusable() error {
	if r == nil || r.c == nil {
		return fmt.Errorf("%w: ddp: a Reducer not made by New: call ddp.New", comm.ErrInvalid)
	}
	if p := r.failed.Load(); p != nil {
		return fmt.Errorf("comm: ddp: an earlier step failed; build a new Reducer: %w", *p)
	}
	return nil
}

// fail records err as the end of this Reducer and returns it.
func (r *Reducer[T]) fail(err error) error {
	if !errors.Is(err, ErrUnused) && strings.Contains(err.Error(), ErrUnused.Error()) {
		// Another rank aborted the world over its unused gradients: say
		// so here too, for errors.Is.
		err = fmt.Errorf("%w: %w", ErrUnused, err)
	}
	r.failed.CompareAndSwap(nil, &err)
	return err
}

// Ready marks gradient i final for this step. It never blocks on the
// network: when i completes its bucket, that bucket and every following
// complete one are started through the hook, in bucket order (bucket k is
// never started before bucket k-1, so all ranks issue the same
// collectives in the same order whatever order their gradients arrive
// in). ctx bounds the collectives it starts. Ready is safe to call from
// several goroutines at once.
//
// Marking a gradient twice in one step, or an index out of range, is an
// error wrapping comm.ErrInvalid that names it.
func (r *Reducer[T]) Ready(ctx context.Context, i int) error {
	if err := r.unusable(); err != nil {
		return err
	}
	if i < 0 || i >= len(r.shapes) {
		return fmt.Errorf("%w: ddp: Ready(%d): there are %d gradients, 0 to %d", comm.ErrInvalid, i, len(r.shapes), len(r.shapes)-1)
	}
	if ctx == nil {
		return fmt.Errorf("%w: ddp: Ready(%d): nil context: pass context.Background() or one with a deadline", comm.ErrInvalid, i)
	}
	mode := r.startStep()
	if mode == stepLocal && r.opts.BucketBuffers > 0 {
		return errPooledNoSync
	}
	if r.marked[i].Swap(true) {
		return fmt.Errorf("%w: ddp: Ready(%d): gradient %d %v was already marked ready in this step", comm.ErrInvalid, i, i, r.shapes[i])
	}
	r.order[r.orderN.Add(1)-1] = int32(i)
	if mode != stepSynced {
		return nil
	}
	if r.pending[r.bucketOf[i]].Add(-1) == 0 {
		r.mu.Lock()
		r.startFull(ctx)
		r.mu.Unlock()
	}
	return nil
}

// startFull starts the buckets from r.next on that are full, in order.
// r.mu must be held.
func (r *Reducer[T]) startFull(ctx context.Context) {
	for r.next < len(r.buckets) && r.pending[r.next].Load() == 0 {
		r.start(ctx, r.next)
		r.next++
	}
}

// start starts bucket k's reduction through the hook. An empty bucket
// (of gradients with no elements) needs none, on any rank.
func (r *Reducer[T]) start(ctx context.Context, k int) {
	b := &r.buckets[k]
	if b.Len == 0 {
		return
	}
	if r.opts.BucketBuffers > 0 && r.held[k] == nil {
		r.lend(k, false) // no gradient of it was fetched: zeros
	}
	w := r.hook(ctx, r.c, b)
	if w == nil {
		// The other ranks will wait for this bucket's collective: abort
		// them with the reason.
		err := fmt.Errorf("%w: ddp: the hook returned a nil *comm.Work for bucket %d on rank %d", comm.ErrInvalid, k, r.c.Rank())
		r.c.Abort(err)
		w = comm.StartFunc(func() error { return err })
	}
	r.works[k] = w
}

// Wait ends the step. In a synced step it starts the buckets not yet
// started, waits for every bucket's reduction, and leaves the reduced
// gradients in Grad(i); after the first synced step it rebuilds the
// buckets in the order the gradients became ready on rank 0 (broadcast,
// so that every rank builds the same buckets), unless Options.KeepOrder.
// With SetSync(false) it only ends the step.
//
// A gradient not marked ready since the last synced step is reduced as
// zeros with Options.FindUnused. Without it, Wait returns an error
// wrapping ErrUnused that names the gradients (index and shape), after
// aborting c so that the other ranks, waiting for this rank's buckets,
// fail at once with the same reason instead of waiting for the timeout.
// A failed step (unused gradients, a failed collective, ctx ending)
// leaves the Reducer unusable, and the gradients belong to the
// collectives already started until they end (abort c to end them).
func (r *Reducer[T]) Wait(ctx context.Context) error {
	if err := r.unusable(); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("%w: ddp: Wait: nil context: pass context.Background() or one with a deadline", comm.ErrInvalid)
	}
	mode := r.startStep()
	defer func() { r.steps++ }()
	if mode == stepLocal {
		r.mu.Lock()
		if r.opts.BucketBuffers > 0 {
			r.resetStep()
			r.mu.Unlock()
			return errPooledNoSync
		}
		for i := range r.marked {
			r.used[i] = r.used[i] || r.marked[i].Load()
		}
		r.resetStep()
		r.mu.Unlock()
		return nil
	}

	r.mu.Lock()
	unused := false
	for i := range r.marked {
		switch {
		case r.marked[i].Load():
		case r.used[i]:
			// Accumulated in an earlier step of this synced one.
			r.pending[r.bucketOf[i]].Add(-1)
		case r.opts.FindUnused:
			clear(r.views[i])
			r.pending[r.bucketOf[i]].Add(-1)
		default:
			unused = true
		}
	}
	if unused {
		err := r.unusedError()
		r.c.Abort(err)
		started := r.works[:r.next]
		r.mu.Unlock()
		r.waitBuckets(ctx, started)
		return r.fail(err)
	}
	r.startFull(ctx)
	r.mu.Unlock()

	if err := r.waitBuckets(ctx, r.works); err != nil {
		return r.fail(err)
	}
	if r.opts.BucketBuffers > 0 {
		r.mu.Lock()
		for k := range r.held {
			if r.held[k] != nil {
				r.giveBack(k)
			}
		}
		// Buffers made past the pool's size (gradients that came far from
		// bucket order) go, so that they do not outlast the step.
		for r.made > r.opts.BucketBuffers && len(r.free) > 0 {
			r.free[len(r.free)-1] = nil
			r.free = r.free[:len(r.free)-1]
			r.made--
		}
		r.mu.Unlock()
	}
	clear(r.used)
	if !r.rebuilt && !r.opts.KeepOrder {
		if err := r.rebuild(ctx); err != nil {
			return r.fail(err)
		}
	}
	r.mu.Lock()
	r.resetStep()
	r.mu.Unlock()
	return nil
}

// unusedError names the gradients neither marked in this step nor
// accumulated since the last synced one, at most a few of them.
func (r *Reducer[T]) unusedError() error {
	var unused []int
	for i := range r.marked {
		if !r.marked[i].Load() && !r.used[i] {
			unused = append(unused, i)
		}
	}
	const most = 8
	var b strings.Builder
	for j, i := range unused[:min(len(unused), most)] {
		if j > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %v", i, r.shapes[i])
	}
	if len(unused) > most {
		fmt.Fprintf(&b, " and %d more", len(unused)-most)
	}
	return fmt.Errorf("%w: rank %d, step %d: %d of %d gradients (index shape): %s; mark every gradient with Ready in each synced step (after accumulating, once), or set Options.FindUnused",
		ErrUnused, r.c.Rank(), r.steps, len(unused), len(r.shapes), b.String())
}

// waitBuckets waits for the reductions of works (nil for buckets that
// needed none) and returns the first failure, naming its bucket.
func (r *Reducer[T]) waitBuckets(ctx context.Context, works []*comm.Work) error {
	var first error
	failed := 0
	for k, w := range works {
		if w == nil {
			continue
		}
		select {
		case <-w.Done():
		case <-ctx.Done():
			return fmt.Errorf("comm: ddp: Wait, step %d: bucket %d of %d not reduced: %w", r.steps, k, len(works), ctx.Err())
		}
		if err := w.Err(); err != nil {
			failed++
			if first == nil {
				first = fmt.Errorf("bucket %d (gradients %v): %w", k, r.buckets[k].Grads, err)
			}
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("comm: ddp: Wait, step %d: %d of %d buckets failed; %w", r.steps, failed, len(works), first)
}

// rebuild lays the buckets out again in the order in which gradients
// became ready on rank 0 in this step (the gradients not marked follow, in
// the default order), so that each bucket fills as early as the model
// allows. Rank 0's order is broadcast: the ranks build the same buckets
// even if their gradients arrived in different orders.
func (r *Reducer[T]) rebuild(ctx context.Context) error {
	n := len(r.shapes)
	order := make([]int32, n)
	if r.c.Rank() == 0 {
		seen := make([]bool, n)
		k := copy(order, r.order[:r.orderN.Load()])
		for _, g := range order[:k] {
			seen[g] = true
		}
		for _, g := range defaultOrder(n) {
			if !seen[g] {
				order[k] = int32(g)
				k++
			}
		}
	}
	if err := comm.Broadcast(ctx, r.c, order, 0); err != nil {
		return fmt.Errorf("comm: ddp: Wait, step %d: broadcasting rank 0's gradient order to rebuild the buckets: %w", r.steps, err)
	}
	ord := make([]int, n)
	seen := make([]bool, n)
	for j, g := range order {
		if g < 0 || int(g) >= n || seen[g] {
			return fmt.Errorf("comm: ddp: Wait, step %d: rank 0's gradient order is not a permutation (gradient %d at %d)", r.steps, g, j)
		}
		seen[g] = true
		ord[j] = int(g)
	}
	r.rebuilt = true
	elemSize := int(unsafe.Sizeof(*new(T)))
	groups := assignBuckets(ord, r.numel, elemSize, r.opts.FirstBucketCapBytes, r.opts.BucketCapBytes)
	if sameGroups(groups, r.buckets) {
		return nil
	}
	r.epoch++
	r.layOut(groups)
	return nil
}

// sameGroups reports whether groups are the buckets' gradients already.
func sameGroups[T comm.Numeric](groups [][]int, buckets []Bucket[T]) bool {
	if len(groups) != len(buckets) {
		return false
	}
	for k, g := range groups {
		if len(g) != len(buckets[k].Grads) {
			return false
		}
		for j := range g {
			if g[j] != buckets[k].Grads[j] {
				return false
			}
		}
	}
	return true
}
