package object

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/gocomm/comm"
)

// ReduceOption changes how Reduce and AllReduce combine
// values. The zero set of options applies f strictly in rank order.
type ReduceOption func(*reduceConfig)

type reduceConfig struct {
	associative bool
}

// Associative declares f associative: f(f(a, b), c) equals f(a, f(b, c)).
// The values then combine along a recursive-doubling schedule (log2 of the
// size rounds of pairwise exchanges, f applied on every rank in parallel)
// instead of all on one rank. The schedule keeps rank order (a lower
// ranks' partial result is always f's first argument), so f need not be
// commutative; an associative and commutative f qualifies too. For an f
// that is only approximately associative (floating-point sums), the result
// may differ in its last bits from the rank-order fold, but is still
// identical on every rank and every run.
//
// The exchanges run point to point on a private view of the communicator
// made for the call: free on the native backend, an
// MPI_Comm_create_group on the mpi backend. The rank-order default needs
// none (a gather and a broadcast).
func Associative() ReduceOption {
	return func(cfg *reduceConfig) { cfg.associative = true }
}

// Stage says where an object collective failed.
type Stage int

// Stages of an object collective.
const (
	// StageArgument: an argument was unusable (a nil function).
	StageArgument Stage = iota
	// StageEncode: a value could not be encoded (encoding/gob's rules:
	// exported fields, registered interface types).
	StageEncode
	// StageDecode: received bytes could not be decoded as T.
	StageDecode
	// StageReduce: the reduction function panicked.
	StageReduce
)

func (s Stage) String() string {
	switch s {
	case StageArgument:
		return "argument"
	case StageEncode:
		return "encode"
	case StageDecode:
		return "decode"
	case StageReduce:
		return "reduce"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// Error is the error of an object collective that failed on one of
// its ranks: every rank of the communicator returns an Error naming
// the same rank (the lowest that failed), stage and reason. It wraps
// comm.ErrInvalid for the argument and encode stages, and the local cause on
// the rank where the failure happened.
type Error struct {
	Op     string // "object.Reduce", "object.AllReduce", ...
	Rank   int    // rank of the communicator where it failed
	Stage  Stage  // what failed there
	Reason string // the failure's message, as that rank saw it
	// Err is the cause on the rank that failed (nil on the others).
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("comm: %s failed on rank %d (%s): %s", e.Op, e.Rank, e.Stage, e.Reason)
}

// Unwrap returns comm.ErrInvalid for the argument and encode stages, and the
// local cause where there is one.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Stage == StageArgument || e.Stage == StageEncode {
		errs = append(errs, comm.ErrInvalid)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// maxReasonLen bounds a failure's message on the wire.
const maxReasonLen = 4 << 10

// Reduce combines every rank's v with f and returns the result on
// root (the zero T on the other ranks). By default f is applied strictly in
// rank order on root: f(...f(f(v0, v1), v2)..., vN-1), so a
// non-commutative, even non-associative f gives the same result on every
// run; with Associative, the values combine along a recursive-doubling
// schedule instead. Values travel encoded with encoding/gob, as the other
// object collectives do (data only, never code; T must be
// gob-encodable); every value, the caller's own included, is passed to f
// as decoded from its encoding, so the result does not depend on which
// rank is root.
//
// Every rank must call it with the same root and options. f must not call
// collectives on c. If encoding or decoding fails on any rank, or f
// panics, every rank returns an *Error naming that rank and the
// reason, without waiting for a timeout.
func Reduce[T any](ctx context.Context, c *comm.Comm, v T, f func(a, b T) T, root int, opts ...ReduceOption) (T, error) {
	return reduce(ctx, c, v, f, root, false, opts)
}

// AllReduce is Reduce with the result on every rank. Every
// rank returns the identical value (decoded from the same bytes), also
// with Associative.
func AllReduce[T any](ctx context.Context, c *comm.Comm, v T, f func(a, b T) T, opts ...ReduceOption) (T, error) {
	return reduce(ctx, c, v, f, 0, true, opts)
}

func reduce[T any](ctx context.Context, c *comm.Comm, v T, f func(a, b T) T, root int, all bool, opts []ReduceOption) (_ T, err error) {
	var zero T
	var cfg reduceConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	op := "object.Reduce"
	if all {
		op = "object.AllReduce"
	}
	if err := hooks.Usable(c, op); err != nil {
		return zero, err
	}
	recRoot := root
	if all {
		recRoot = -1
	}
	ctx, end := hooks.Begin(ctx, c, op, recRoot)
	var data []byte
	defer func() { end(int64(len(data)), err) }()
	var local *Error
	if !all && (root < 0 || root >= c.Size()) {
		err := fmt.Errorf("%w: root %d out of range [0,%d)", comm.ErrInvalid, root, c.Size())
		local = &Error{Op: op, Rank: c.Rank(), Stage: StageArgument, Reason: err.Error(), Err: err}
	} else if f == nil {
		err := fmt.Errorf("%w: the reduction function is nil", comm.ErrInvalid)
		local = &Error{Op: op, Rank: c.Rank(), Stage: StageArgument, Reason: "the reduction function is nil", Err: err}
	} else {
		var err error
		if data, err = encode(v); err != nil {
			local = &Error{Op: op, Rank: c.Rank(), Stage: StageEncode, Reason: err.Error(), Err: err}
		}
	}
	seq := hooks.NextSeq(c)
	var cause error
	if local != nil {
		cause = local.Err
	}
	// Every rank must pass the same root and schedule: the exchange
	// checks it, so that ranks that disagree fail at once instead of
	// waiting in different exchanges.
	agree := int64(root) << 1
	if cfg.associative {
		agree |= 1
	}
	sizes, err := exchangeSizes(ctx, c, op, int64(len(data)), agree, local, cause)
	if err != nil {
		return zero, err
	}
	if cfg.associative {
		res, err := treeReduce(ctx, c, op, data, f, seq)
		if err != nil || (!all && c.Rank() != root) {
			return zero, err
		}
		return res, nil
	}
	return foldReduce(ctx, c, op, data, sizes, f, root, all)
}

// exchangeSizes is the first step of an object collective: every rank
// contributes the size of its encoded value, or the failure it knows of
// (its own, or one it learnt of), so that a failure on any rank fails the
// call on every rank at once, with the report of the lowest rank that has
// one. It returns the sizes.
//
// cause is this rank's own failure's cause, set on the returned report when
// it names this rank.
//
// agree is a value every rank must pass alike (the root and the schedule):
// a rank that passes another fails the call on every rank, as an argument
// error of that rank.
func exchangeSizes(ctx context.Context, c *comm.Comm, op string, size, agree int64, local *Error, cause error) ([]int64, error) {
	var reason []byte
	word := []int64{size, agree}
	if local != nil {
		reason = failureBytes(local)
		word[0] = -1 - int64(len(reason))
	}
	words := make([]int64, 2*c.Size())
	if err := comm.AllGather(ctx, c, word, words); err != nil {
		return nil, err
	}
	sizes := make([]int64, c.Size())
	for r := range sizes {
		sizes[r] = words[2*r]
	}
	failed := false
	counts := make([]int, c.Size())
	for r, s := range sizes {
		if s < 0 {
			failed = true
			counts[r] = int(-1 - s)
			if counts[r] > maxReasonLen+16 {
				return nil, fmt.Errorf("%w: %s: rank %d announced a failure report of %d bytes", comm.ErrLength, op, r, counts[r])
			}
		}
	}
	if !failed {
		if err := checkSizes(op, sizes, func(r int) int { return r }); err != nil {
			return nil, err
		}
		for r := range sizes {
			if a := words[2*r+1]; a != words[1] {
				e := &Error{Op: op, Rank: r, Stage: StageArgument, Reason: fmt.Sprintf(
					"rank %d passed another root or schedule than rank 0 (root %d, associative %v; rank 0: root %d, associative %v)",
					r, a>>1, a&1 == 1, words[1]>>1, words[1]&1 == 1)}
				if r == c.Rank() {
					e.Err = fmt.Errorf("%w: %s", comm.ErrInvalid, e.Reason)
				}
				return nil, e
			}
		}
		return sizes, nil
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	reasons := make([]byte, total)
	if err := comm.AllGatherV(ctx, c, reason, reasons, counts); err != nil {
		return nil, err
	}
	for _, n := range counts {
		if n > 0 { // the lowest reporting rank: its report starts reasons
			e := parseFailure(op, reasons[:n])
			if e.Rank == c.Rank() {
				e.Err = cause
			}
			return nil, e
		}
	}
	return nil, fmt.Errorf("%w: %s: a failure was announced without a report", comm.ErrLength, op)
}

// failureBytes encodes a failure for the wire: the stage, then the reason.
func failureBytes(e *Error) []byte {
	reason := e.Reason
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen]
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(e.Stage))
	b = binary.LittleEndian.AppendUint64(b, uint64(int64(e.Rank)))
	return append(b, reason...)
}

// parseFailure decodes failureBytes; malformed input is reported as such.
func parseFailure(op string, b []byte) *Error {
	if len(b) < 16 {
		return &Error{Op: op, Rank: -1, Stage: StageDecode, Reason: fmt.Sprintf("malformed failure report of %d bytes", len(b))}
	}
	return &Error{Op: op, Stage: Stage(binary.LittleEndian.Uint64(b)), Rank: int(int64(binary.LittleEndian.Uint64(b[8:]))), Reason: string(b[16:])}
}

// applyReduce runs f, turning a panic into an error.
func applyReduce[T any](f func(a, b T) T, a, b T) (out T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the reduction function panicked: %v", p)
		}
	}()
	return f(a, b), nil
}

// foldReduce gathers the encoded values on root, which decodes and
// folds them in rank order, then broadcasts its status (and, for the
// all-reduce, the encoded result).
func foldReduce[T any](ctx context.Context, c *comm.Comm, op string, data []byte, sizes []int64, f func(a, b T) T, root int, all bool) (T, error) {
	var zero T
	counts, total := countsOf(sizes)
	var gathered []byte
	if c.Rank() == root {
		gathered = make([]byte, total)
	}
	if err := comm.GatherV(ctx, c, data, gathered, counts, root); err != nil {
		return zero, err
	}
	// head is [failure report length, or -1 on success; result length].
	head := []int64{-1, 0}
	if c.Rank() == root {
		res, fail := foldValues(op, c.Rank(), gathered, counts, f)
		var out []byte
		if fail == nil && all {
			res, out, fail = roundTrip(op, c.Rank(), res)
		}
		if fail != nil {
			out = failureBytes(fail)
			head[0] = int64(len(out))
		}
		head[1] = int64(len(out))
		if err := comm.Broadcast(ctx, c, head, root); err != nil {
			return zero, err
		}
		if len(out) > 0 {
			if err := comm.Broadcast(ctx, c, out, root); err != nil {
				return zero, err
			}
		}
		if fail != nil {
			return zero, fail
		}
		return res, nil
	}
	if err := comm.Broadcast(ctx, c, head, root); err != nil {
		return zero, err
	}
	n := head[1]
	if head[0] >= 0 {
		if n > maxReasonLen+16 {
			return zero, fmt.Errorf("%w: %s: root %d announced a failure report of %d bytes", comm.ErrLength, op, root, n)
		}
	}
	if n < 0 {
		return zero, fmt.Errorf("%w: %s: root %d announced a result of %d bytes", comm.ErrLength, op, root, n)
	}
	if n == 0 {
		return zero, nil
	}
	buf := make([]byte, n)
	if err := comm.Broadcast(ctx, c, buf, root); err != nil {
		return zero, err
	}
	if head[0] >= 0 {
		return zero, parseFailure(op, buf)
	}
	// root decoded these very bytes: this decode succeeds as well.
	return decode[T](buf, root)
}

// foldValues decodes the gathered values and folds them in rank order on
// rank root.
func foldValues[T any](op string, root int, gathered []byte, counts []int, f func(a, b T) T) (T, *Error) {
	var acc T
	off := 0
	for r, n := range counts {
		v, err := decode[T](gathered[off:off+n], r)
		off += n
		if err != nil {
			return acc, &Error{Op: op, Rank: root, Stage: StageDecode, Reason: err.Error(), Err: err}
		}
		if r == 0 {
			acc = v
			continue
		}
		if acc, err = applyReduce(f, acc, v); err != nil {
			return acc, &Error{Op: op, Rank: root, Stage: StageReduce, Reason: fmt.Sprintf("combining the values of ranks 0-%d with rank %d's: %v", r-1, r, err), Err: err}
		}
	}
	return acc, nil
}

// roundTrip encodes v and decodes it back, so that the value this rank
// keeps is the one every receiver of the bytes gets.
func roundTrip[T any](op string, rank int, v T) (T, []byte, *Error) {
	b, err := encode(v)
	if err != nil {
		return v, nil, &Error{Op: op, Rank: rank, Stage: StageEncode, Reason: "the reduced value: " + err.Error(), Err: err}
	}
	out, err := decode[T](b, rank)
	if err != nil {
		return v, nil, &Error{Op: op, Rank: rank, Stage: StageDecode, Reason: "the reduced value: " + err.Error(), Err: err}
	}
	return out, b, nil
}

// treeTagDisc names the private communicator of one tree reduction.
const treeTagDisc = -1 << 40

// treeReduce combines the values by recursive doubling in rank
// order (MPICH's scheme for non-commutative operations): with p2 the
// largest power of two not above the size and rem = size - p2, ranks 2i+1
// < 2rem first hand their value to 2i; the p2 remaining ranks, in rank
// order, exchange partial results with the rank whose virtual rank differs
// in one bit, lower block first; then ranks 2i hand the result to 2i+1.
// Messages go point to point on a private view of c (its own id, derived
// from the sequence number of the call's first collective), so they never
// meet the caller's own sends and receives. A failure travels in place of
// a value, so every rank ends up with the lowest failed rank's report.
func treeReduce[T any](ctx context.Context, c *comm.Comm, op string, data []byte, f func(a, b T) T, seq uint64) (T, error) {
	var zero T
	if c.Size() == 1 {
		res, err := decode[T](data, 0)
		if err != nil {
			return zero, &Error{Op: op, Rank: 0, Stage: StageDecode, Reason: err.Error(), Err: err}
		}
		return res, nil
	}
	g, err := hooks.Private(ctx, c, seq, treeTagDisc)
	if err != nil {
		return zero, err
	}
	defer g.Close()
	t := &treeState[T]{ctx: ctx, g: g, op: op, f: f, data: data}
	// Every step uses tags of its own: 2*step for the head, 2*step+1 for
	// the body (sends are started concurrently, so only tags keep them
	// apart).
	if acc, fail := t.decodeFrom(data, c.Rank()); fail != nil {
		t.failHere(fail)
	} else {
		t.acc = acc
	}

	p2 := 1 << (bits.Len(uint(c.Size())) - 1)
	rem := c.Size() - p2
	r := c.Rank()
	vr := r - rem // virtual rank in the doubling phase; -1 if none
	switch {
	case r < 2*rem && r%2 == 1:
		vr = -1
		if err := t.send(r-1, 0); err != nil {
			return zero, err
		}
	case r < 2*rem:
		vr = r / 2
		if err := t.receiveAndCombine(r+1, 0, false); err != nil {
			return zero, err
		}
	}
	step := 1
	if vr >= 0 {
		for mask := 1; mask < p2; mask <<= 1 {
			pv := vr ^ mask
			partner := pv + rem
			if pv < rem {
				partner = 2 * pv
			}
			if err := t.exchange(partner, step, pv < vr); err != nil {
				return zero, err
			}
			step++
		}
	} else {
		step += bits.Len(uint(p2)) - 1
	}
	switch {
	case r < 2*rem && r%2 == 1:
		if err := t.receive(r-1, step); err != nil {
			return zero, err
		}
	case r < 2*rem:
		if err := t.send(r+1, step); err != nil {
			return zero, err
		}
	}
	// Ranks of one round that fail at once (both partners apply f to the
	// same values) learn of each other only here: a last agreement, one
	// int64 per rank on success, gives every rank the same report.
	if _, err := exchangeSizes(ctx, c, op, 0, 0, t.fail, t.cause); err != nil {
		return zero, err
	}
	return t.acc, nil
}

// treeState is one rank's side of treeReduce: its partial result
// (acc, and data, its encoding, which receivers decode) or the failure it
// knows of.
type treeState[T any] struct {
	ctx  context.Context
	g    *comm.Comm
	op   string
	f    func(a, b T) T
	acc  T
	data []byte
	fail *Error
	// cause is the cause of this rank's own failure, if it had one.
	cause error
}

// failHere records a failure on this rank.
func (t *treeState[T]) failHere(e *Error) {
	if t.cause == nil {
		t.cause = e.Err
	}
	if t.fail == nil || e.Rank < t.fail.Rank {
		t.fail = e
	}
}

// message kinds: the head of every message is [kind, length].
const (
	treeValue   = 0
	treeFailure = 1
)

func (t *treeState[T]) decodeFrom(b []byte, from int) (T, *Error) {
	v, err := decode[T](b, from)
	if err != nil {
		return v, &Error{Op: t.op, Rank: t.g.Rank(), Stage: StageDecode, Reason: err.Error(), Err: err}
	}
	return v, nil
}

// payload is what this rank sends: its failure, or its partial result.
func (t *treeState[T]) payload() ([]int64, []byte) {
	if t.fail != nil {
		b := failureBytes(t.fail)
		return []int64{treeFailure, int64(len(b))}, b
	}
	return []int64{treeValue, int64(len(t.data))}, t.data
}

func (t *treeState[T]) startSend(to, step int) []*comm.Work {
	head, body := t.payload()
	ws := []*comm.Work{comm.StartSend(t.ctx, t.g, head, to, 2*step)}
	if len(body) > 0 {
		ws = append(ws, comm.StartSend(t.ctx, t.g, body, to, 2*step+1))
	}
	return ws
}

func (t *treeState[T]) send(to, step int) error {
	return waitAll(t.startSend(to, step))
}

// recv reads one message from rank from: a failure report or a value's
// encoding.
func (t *treeState[T]) recv(from, step int) (kind int64, body []byte, err error) {
	head := make([]int64, 2)
	if _, err := comm.Recv(t.ctx, t.g, head, from, 2*step); err != nil {
		return 0, nil, err
	}
	kind, n := head[0], head[1]
	switch {
	case kind != treeValue && kind != treeFailure, n < 0, kind == treeFailure && n > maxReasonLen+16:
		return 0, nil, fmt.Errorf("%w: %s: rank %d sent a message head %v", comm.ErrLength, t.op, from, head)
	}
	body = make([]byte, n)
	if n > 0 {
		if _, err := comm.Recv(t.ctx, t.g, body, from, 2*step+1); err != nil {
			return 0, nil, err
		}
	}
	return kind, body, nil
}

// merge takes in a received message: a failure replaces this rank's state
// unless it already knows of a lower rank's; a value is decoded and
// returned.
func (t *treeState[T]) merge(from int, kind int64, body []byte) (T, bool) {
	var v T
	if kind == treeFailure {
		e := parseFailure(t.op, body)
		if t.fail == nil || e.Rank < t.fail.Rank {
			t.fail = e
		}
		return v, false
	}
	if t.fail != nil {
		return v, false
	}
	v, fail := t.decodeFrom(body, from)
	if fail != nil {
		t.failHere(fail)
		return v, false
	}
	return v, true
}

// combine sets acc to f(lower, higher) and re-encodes it.
func (t *treeState[T]) combine(theirs T, theirsFirst bool) {
	a, b := t.acc, theirs
	if theirsFirst {
		a, b = theirs, t.acc
	}
	res, err := applyReduce(t.f, a, b)
	if err != nil {
		t.failHere(&Error{Op: t.op, Rank: t.g.Rank(), Stage: StageReduce, Reason: err.Error(), Err: err})
		return
	}
	res, data, fail := roundTrip(t.op, t.g.Rank(), res)
	if fail != nil {
		t.failHere(fail)
		return
	}
	t.acc, t.data = res, data
}

func (t *treeState[T]) receiveAndCombine(from, step int, theirsFirst bool) error {
	kind, body, err := t.recv(from, step)
	if err != nil {
		return err
	}
	if v, ok := t.merge(from, kind, body); ok {
		t.combine(v, theirsFirst)
	}
	return nil
}

// receive replaces this rank's state with the one from rank from (the
// final hand-over).
func (t *treeState[T]) receive(from, step int) error {
	kind, body, err := t.recv(from, step)
	if err != nil {
		return err
	}
	t.fail = nil
	if v, ok := t.merge(from, kind, body); ok {
		t.acc = v
	}
	return nil
}

// exchange swaps partial results with partner and combines them.
func (t *treeState[T]) exchange(partner, step int, theirsFirst bool) error {
	sends := t.startSend(partner, step)
	rerr := t.receiveAndCombine(partner, step, theirsFirst)
	return errors.Join(waitAll(sends), rerr)
}

func waitAll(ws []*comm.Work) error {
	var errs []error
	for _, w := range ws {
		if err := w.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
