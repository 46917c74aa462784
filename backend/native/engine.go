package native

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/internal/transport"
)

// execution is one collective in flight: its plan, its buffers and the
// header its messages carry.
type execution struct {
	c     *Comm
	req   *backend.Request
	hdr   transport.Header
	esize int
	work  []byte // algo.Work
	input []byte // algo.Input
	// scratch receives data that is then reduced into work; sized by the
	// largest reducing receive of the plan.
	scratch []byte
	// ordinals counts, per peer, the messages already matched in the
	// current step (sends and receives separately).
	sendOrd, recvOrd []int
	// lazySrc is an out-of-place input that work stands for but was not
	// copied into it (see lazyCopy): pending lists the element ranges of
	// work that still hold nothing but stand for the same range of
	// lazySrc.
	lazySrc []byte
	pending []elemRange
	// sendBufs are the payloads of the current step's sends.
	sendBufs [][]byte
	// small is a scratch of smallScratch bytes that stays with the
	// record: the reducing receives of small collectives take no trip
	// through the buffer pool (two sync.Pool gets and two puts, a
	// noticeable share of a small all-reduce's time).
	small []byte
}

// smallScratch is the size of an execution record's own scratch.
const smallScratch = 512

// executions recycles execution records (and their per-peer counters):
// a loop of small collectives allocates nothing.
var executions = sync.Pool{New: func() any { return new(execution) }}

func (c *Comm) newExecution(req *backend.Request, used algo.Algorithm) *execution {
	e := executions.Get().(*execution)
	sendOrd, recvOrd, sendBufs, small := e.sendOrd, e.recvOrd, e.sendBufs, e.small
	if cap(sendOrd) < c.size {
		sendOrd, recvOrd = make([]int, c.size), make([]int, c.size)
	}
	*e = execution{
		c:     c,
		req:   req,
		esize: req.DType.Size(),
		hdr: transport.Header{
			Comm: c.id,
			Seq:  req.Seq,
			Sig: transport.Signature{
				Kind:  req.Kind,
				DType: req.DType,
				Op:    req.Op,
				Algo:  uint8(used),
				Root:  int32(req.Root),
				Count: uint64(req.SigCount),
			},
		},
		sendOrd:  sendOrd[:c.size],
		recvOrd:  recvOrd[:c.size],
		sendBufs: sendBufs[:0],
		small:    small,
	}
	return e
}

// release recycles e once nothing of its operation runs any more.
func (e *execution) release() {
	sendOrd, recvOrd, sendBufs, small := e.sendOrd, e.recvOrd, e.sendBufs, e.small
	clear(sendBufs[:cap(sendBufs)]) // keep no caller's buffer alive
	*e = execution{sendOrd: sendOrd, recvOrd: recvOrd, sendBufs: sendBufs[:0], small: small}
	executions.Put(e)
}

func (e *execution) buf(b algo.Buf) []byte {
	if b == algo.Input {
		return e.input
	}
	return e.work
}

func (e *execution) span(b algo.Buf, off, n int) []byte {
	return e.buf(b)[off*e.esize : (off+n)*e.esize]
}

// run executes plan step by step. A failure after the first message aborts
// the whole world: the other ranks are mid-collective too and would
// otherwise wait for messages that never come.
func (e *execution) run(ctx context.Context, plan algo.Plan) error {
	defer e.c.root().waits.done() // the waits it marks end with it
	// Reducing receives land in scratch first. A step with one receive
	// needs room for it; a step with several posts them all at once (so
	// that pieces of a pipelined message stream in while earlier ones are
	// reduced) and needs room for all of them.
	need := 0
	for _, st := range plan.Steps {
		total, largest := 0, 0
		for _, x := range st.Recvs {
			if x.Reduce {
				total += x.Len
				largest = max(largest, x.Len)
			}
		}
		if len(st.Recvs) > 1 {
			need = max(need, total)
		} else {
			need = max(need, largest)
		}
	}
	pool := &e.c.root().pool
	switch n := need * e.esize; {
	case n > smallScratch:
		e.scratch = pool.Get(n)
		defer pool.Put(e.scratch)
	case n > 0:
		if e.small == nil {
			e.small = kernel.Alloc(smallScratch) // 8-byte aligned, for any element type
		}
		e.scratch = e.small[:n]
	}
	// Some plans use room beyond the operation's layout (plan.Scratch
	// elements past the end of Work); give them a larger work buffer and
	// copy the layout back afterwards.
	layout := e.work
	if plan.Scratch > 0 {
		e.settle(0, len(layout)/max(e.esize, 1))
		e.work = pool.Get(len(layout) + plan.Scratch*e.esize)
		defer pool.Put(e.work)
		copy(e.work, layout)
	}
	for i, st := range plan.Steps {
		if err := e.step(ctx, i, st); err != nil {
			return err
		}
	}
	if len(e.pending) > 0 {
		e.settle(0, len(e.work)/e.esize)
	}
	if plan.Scratch > 0 {
		copy(layout, e.work)
	}
	return nil
}

func (e *execution) step(ctx context.Context, i int, st algo.Step) error {
	for _, cp := range st.Copies {
		src := e.payload(algo.Xfer{Buf: cp.From, Off: cp.FromOff, Len: cp.Len})
		e.drop(cp.ToOff, cp.ToOff+cp.Len)
		copy(e.span(algo.Work, cp.ToOff, cp.Len), src)
	}
	if len(st.Sends) == 0 && len(st.Recvs) == 0 {
		return nil
	}
	e.sendBufs = e.sendBufs[:0]
	for _, x := range st.Sends {
		e.sendOrd[x.Peer] = 0
		e.sendBufs = append(e.sendBufs, e.payload(x))
	}
	for _, x := range st.Recvs {
		e.recvOrd[x.Peer] = 0
	}
	// Receives run on this goroutine (or are posted from it) so that they
	// are posted at once and large payloads land straight in their
	// buffers; sends run beside them. Peers' endpoints always drain their
	// connections, so a send never waits for the matching receive.
	// Small sends go first on this goroutine: the socket takes them at
	// once, and a goroutine hand-off would cost more than the send.
	// Sends the endpoint can start and finish later (through shared
	// memory: by single copy, or large ones through the ring, which the
	// receive's polling writes as room appears) are started here and
	// finished after the receives: no goroutine, and no thread waiting
	// beside the receive. Large sends of a step that reduces what it
	// receives go through the ring, not by single copy (copySends).
	var sendDone chan error
	var started []startedSend
	if len(st.Sends) > 0 {
		copied := e.copySends(st)
		switch {
		case len(st.Recvs) > 0 && e.startableSends(st.Sends, copied):
			started = e.startSends(ctx, i, st.Sends, copied)
		case len(st.Recvs) == 0 || e.inlineSends(st.Sends):
			if err := e.sends(ctx, i, st.Sends, e.sendBufs, true, copied); err != nil || len(st.Recvs) == 0 {
				return err
			}
		default:
			sendDone = make(chan error, 1)
			bufs := e.sendBufs
			go func() { sendDone <- e.sends(ctx, i, st.Sends, bufs, false, copied) }()
		}
	}
	var err error
	if len(st.Recvs) == 1 {
		err = e.recv(ctx, i, st.Recvs[0], e.scratch)
	} else {
		err = e.recvAll(ctx, i, st.Recvs)
	}
	if sendDone != nil {
		// The sends' goroutine does not mark its waits (they would hide
		// the receives'); a single send still unfinished is marked here.
		if len(st.Sends) == 1 {
			e.c.root().waits.begin(e.c.members[st.Sends[0].Peer])
		}
		if serr := <-sendDone; err == nil {
			err = serr
		}
	}
	for _, s := range started {
		e.c.root().waits.begin(e.c.members[s.peer])
		if serr := s.finish(ctx); serr != nil && err == nil {
			err = e.fail(ctx, s.peer, i, "sending to", serr)
		}
	}
	return err
}

// copySendMin is the smallest send that copySends keeps out of single
// copy.
const copySendMin = 2 << 20

// copySends reports whether a step's sends should be copied through the
// endpoint's rings (transport.CopySender) even where the endpoint would
// let the peer copy them out of this process: the step reduces every
// receive piece by piece (recvReducing) and every send is at least
// copySendMin bytes. Plans are symmetric, so the peers reduce these sends
// the same way, straight out of the ring while it is in their cache; the
// kernel's copy across processes (process_vm_readv, page by page with
// pinning) runs at a fraction of memcpy's speed on large messages, and a
// single-copy sender waits for its peer to be scheduled. Only the path
// changes, never the bytes.
func (e *execution) copySends(st algo.Step) bool {
	if _, ok := e.c.ep.(transport.CopySender); !ok || e.req.User != nil || len(st.Recvs) == 0 {
		return false
	}
	if _, ok := e.c.ep.(transport.SinkReceiver); !ok {
		return false
	}
	for _, x := range st.Recvs {
		if !x.Reduce || x.Len*e.esize < sinkMinBytes {
			return false
		}
	}
	for _, x := range st.Sends {
		if x.Len*e.esize < copySendMin {
			return false
		}
	}
	return true
}

// startedSend is a send StartSend began.
type startedSend struct {
	peer   int
	finish func(context.Context) error
}

// startableSends reports whether the endpoint can start every send of a
// step and finish it later (transport.SendStarter, or with copied
// transport.CopySender).
func (e *execution) startableSends(xs []algo.Xfer, copied bool) bool {
	ss, ok := e.c.ep.(transport.SendStarter)
	if !ok {
		return false
	}
	startable := ss.SendsStartable
	if copied {
		startable = e.c.ep.(transport.CopySender).CopiesStartable
	}
	for _, x := range xs {
		if !startable(e.c.members[x.Peer], x.Len*e.esize) {
			return false
		}
	}
	return true
}

// startSends starts a step's sends (with copied through
// transport.CopySender); each must be finished.
func (e *execution) startSends(ctx context.Context, step int, xs []algo.Xfer, copied bool) []startedSend {
	start := e.c.ep.(transport.SendStarter).StartSend
	if copied {
		start = e.c.ep.(transport.CopySender).StartSendCopy
	}
	started := make([]startedSend, len(xs))
	for j, x := range xs {
		h := e.hdr
		h.Tag = e.tag(step, e.sendOrd[x.Peer])
		e.sendOrd[x.Peer]++
		started[j] = startedSend{x.Peer, start(ctx, e.c.members[x.Peer], h, e.sendBufs[j])}
	}
	return started
}

// inlineSendBytes bounds the sends of a step that run before its receives
// are posted.
const inlineSendBytes = 64 << 10

// inlineSends reports whether a step's sends should run before its
// receives on this goroutine: they are small, or the endpoint buffers them
// (shared memory).
func (e *execution) inlineSends(xs []algo.Xfer) bool {
	n := 0
	for _, x := range xs {
		n += x.Len * e.esize
	}
	if n <= inlineSendBytes {
		return true
	}
	bs, ok := e.c.ep.(transport.BufferedSender)
	if !ok {
		return false
	}
	for _, x := range xs {
		if !bs.SendsBuffered(e.c.members[x.Peer], n) {
			return false
		}
	}
	return true
}

// recvAll posts every receive of a step at once and handles completions in
// order, reducing each piece while later ones are still arriving.
func (e *execution) recvAll(ctx context.Context, step int, xs []algo.Xfer) error {
	done := make([]chan error, len(xs))
	into := make([][]byte, len(xs))
	fromSrc := make([]bool, len(xs))
	off := 0
	for j, x := range xs {
		h := e.hdr
		h.Tag = e.tag(step, e.recvOrd[x.Peer])
		e.recvOrd[x.Peer]++
		into[j] = e.span(algo.Work, x.Off, x.Len)
		if x.Reduce {
			n := x.Len * e.esize
			into[j] = e.scratch[off : off+n]
			off += n
			fromSrc[j] = e.covered(x.Off, x.Len)
		}
		e.drop(x.Off, x.Off+x.Len)
		done[j] = make(chan error, 1)
		go func() {
			_, err := e.c.ep.Recv(ctx, e.c.members[x.Peer], h, into[j])
			done[j] <- err
		}()
	}
	var first error
	waits := e.c.root().waits
	for j, x := range xs {
		waits.begin(e.c.members[x.Peer])
		err := <-done[j] // drain every receive before returning: they write our buffers
		switch {
		case first != nil:
		case err != nil:
			first = e.fail(ctx, x.Peer, step, "waiting for", err)
		case x.Reduce:
			if rerr := e.reduceInto(x, into[j], fromSrc[j]); rerr != nil {
				first = e.fail(ctx, -1, step, "reducing", rerr)
			}
		}
	}
	return first
}

// tag numbers a message by its step and its ordinal among the messages
// between the same two ranks in that step.
func (e *execution) tag(step, ord int) uint64 { return uint64(step)<<32 | uint64(ord) }

// sends sends a step's messages in order; with copied through
// transport.CopySender.SendCopy (see copySends). track marks each large
// send as a wait (waitWatch; a small one never waits for the peer): only
// on the collective's own goroutine, whose marks are the only ones.
func (e *execution) sends(ctx context.Context, step int, xs []algo.Xfer, bufs [][]byte, track, copied bool) error {
	if e.concurrentSends(xs, bufs) {
		return e.sendsAtOnce(ctx, step, xs, bufs, track, copied)
	}
	send := e.sendFunc(copied)
	for j, x := range xs {
		h := e.hdr
		h.Tag = e.tag(step, e.sendOrd[x.Peer])
		e.sendOrd[x.Peer]++
		if track && len(bufs[j]) > inlineSendBytes {
			e.c.root().waits.begin(e.c.members[x.Peer])
		}
		if err := send(ctx, e.c.members[x.Peer], h, bufs[j]); err != nil {
			return e.fail(ctx, x.Peer, step, "sending to", err)
		}
	}
	return nil
}

// sendFunc is the endpoint's send: with copied through
// transport.CopySender.SendCopy (see copySends).
func (e *execution) sendFunc(copied bool) func(context.Context, int, transport.Header, []byte) error {
	if copied {
		return e.c.ep.(transport.CopySender).SendCopy
	}
	return e.c.ep.Send
}

// concurrentSends reports whether a step's sends should run side by side,
// one goroutine each: several large sends (above inlineSendBytes), each to
// a peer of its own, none of which the endpoint buffers or moves through
// shared memory (measured over TCP only). One after the other, a linear
// broadcast's root over TCP feeds one socket at a time while its other
// peers wait their turn; side by side, each connection takes bytes
// whenever its peer reads, as Open MPI's progress engine interleaves its
// sends (measured on a crowded host over TCP: docs/performance.md).
func (e *execution) concurrentSends(xs []algo.Xfer, bufs [][]byte) bool {
	if len(xs) < 2 {
		return false
	}
	bs, buffers := e.c.ep.(transport.BufferedSender)
	sm, shares := e.c.ep.(interface{ SharedMemory(peer int) bool })
	for j, x := range xs {
		n, peer := len(bufs[j]), e.c.members[x.Peer]
		if n <= inlineSendBytes || buffers && bs.SendsBuffered(peer, n) || shares && sm.SharedMemory(peer) {
			return false
		}
		for _, y := range xs[:j] {
			if y.Peer == x.Peer {
				return false
			}
		}
	}
	return true
}

// sendsAtOnce sends a step's messages side by side (concurrentSends): the
// first on this goroutine, the others on one goroutine each, and returns
// when all have ended, with the first failure in xs' order.
func (e *execution) sendsAtOnce(ctx context.Context, step int, xs []algo.Xfer, bufs [][]byte, track, copied bool) error {
	send := e.sendFunc(copied)
	hs := make([]transport.Header, len(xs))
	for j, x := range xs {
		hs[j] = e.hdr
		hs[j].Tag = e.tag(step, e.sendOrd[x.Peer])
		e.sendOrd[x.Peer]++
	}
	errs := make([]chan error, len(xs))
	for j := 1; j < len(xs); j++ {
		errs[j] = make(chan error, 1)
		go func() { errs[j] <- send(ctx, e.c.members[xs[j].Peer], hs[j], bufs[j]) }()
	}
	waits := e.c.root().waits
	var first error
	for j, x := range xs {
		if track {
			waits.begin(e.c.members[x.Peer])
		}
		var err error
		if j == 0 {
			err = send(ctx, e.c.members[x.Peer], hs[0], bufs[0])
		} else {
			err = <-errs[j]
		}
		if err != nil && first == nil {
			first = e.fail(ctx, x.Peer, step, "sending to", err)
		}
	}
	return first
}

func (e *execution) recv(ctx context.Context, step int, x algo.Xfer, scratch []byte) error {
	h := e.hdr
	h.Tag = e.tag(step, e.recvOrd[x.Peer])
	e.recvOrd[x.Peer]++
	dst := e.span(algo.Work, x.Off, x.Len)
	into, fromSrc := dst, false
	if x.Reduce {
		into, fromSrc = scratch[:len(dst)], e.covered(x.Off, x.Len)
	}
	e.drop(x.Off, x.Off+x.Len)
	e.c.root().waits.begin(e.c.members[x.Peer])
	if sr, ok := e.c.ep.(transport.SinkReceiver); ok && x.Reduce && e.req.User == nil && len(dst) >= sinkMinBytes {
		return e.recvReducing(ctx, step, sr, x, h, dst, fromSrc)
	}
	if _, err := e.c.ep.Recv(ctx, e.c.members[x.Peer], h, into); err != nil {
		return e.fail(ctx, x.Peer, step, "waiting for", err)
	}
	if x.Reduce {
		if err := e.reduceInto(x, into, fromSrc); err != nil {
			return e.fail(ctx, -1, step, "reducing", err)
		}
	}
	return nil
}

// sinkMinBytes is the smallest reducing receive that reduces the
// message piece by piece as the transport takes it in (recvReducing)
// instead of receiving it into scratch and reducing it afterwards. Below
// it the message and its scratch fit in a core's L2 cache (1 MiB here)
// anyway, and the closure would allocate.
const sinkMinBytes = 512 << 10

// recvReducing is recv of a reducing x whose message the endpoint hands
// over in pieces (transport.SinkReceiver): each piece is reduced into dst
// (or, where dst still stands for lazySrc, dst = lazySrc op piece) while
// it is in cache, so the message is never written out to scratch and
// read back. Pieces need not end on an element: a split element is
// gathered in carry and reduced once whole.
func (e *execution) recvReducing(ctx context.Context, step int, sr transport.SinkReceiver, x algo.Xfer, h transport.Header, dst []byte, fromSrc bool) error {
	var src []byte
	if fromSrc {
		src = e.lazySrc[x.Off*e.esize : (x.Off+x.Len)*e.esize]
	}
	var rerr error
	reduce := func(off int, p []byte) {
		var err error
		if fromSrc {
			err = kernel.ReduceTo(e.req.DType, e.req.Op, dst[off:off+len(p)], src[off:off+len(p)], p)
		} else {
			err = kernel.Reduce(e.req.DType, e.req.Op, dst[off:off+len(p)], p)
		}
		if err != nil && rerr == nil {
			rerr = err
		}
	}
	if _, err := sr.RecvSink(ctx, e.c.members[x.Peer], h, dst, wholeElems(e.esize, reduce)); err != nil {
		return e.fail(ctx, x.Peer, step, "waiting for", err)
	}
	if rerr != nil {
		return e.fail(ctx, -1, step, "reducing", rerr)
	}
	return nil
}

// wholeElems returns a sink for consecutive pieces of a message of
// esize-byte elements (esize <= 16) that passes reduce the same bytes cut
// on element boundaries: an element split between pieces is gathered and
// passed on alone once whole. The sink is for one goroutine at a time.
func wholeElems(esize int, reduce func(off int, p []byte)) func(off int, p []byte) {
	var carry [16]byte
	nc := 0
	return func(off int, p []byte) {
		if nc > 0 {
			k := copy(carry[nc:esize], p)
			nc += k
			p, off = p[k:], off+k
			if nc < esize {
				return
			}
			reduce(off-esize, carry[:esize])
			nc = 0
		}
		whole := len(p) / esize * esize
		if whole > 0 {
			reduce(off, p[:whole])
		}
		nc = copy(carry[:], p[whole:])
	}
}

// fail turns a transport error into an *core.OpError and aborts the world
// unless the failure already is an abort.
func (e *execution) fail(ctx context.Context, peer, step int, doing string, err error) error {
	rawPeer := peer
	peer = e.c.shownRank(peer)
	var chain []int // world ranks rawPeer waits for in turn
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, transport.ErrAborted) {
		if rawPeer >= 0 && rawPeer < len(e.c.members) {
			chain = e.c.root().waits.chain(e.c.members[e.c.rank], e.c.members[rawPeer])
		}
		err = fmt.Errorf("%w at step %d %s rank %d (%s)%s", ctxErr, step, doing, peer, e.hdr.Sig, e.c.describeChain(chain))
	}
	opErr := &core.OpError{Op: e.req.Kind, Rank: e.c.shownRank(e.c.rank), Peer: peer, Seq: e.req.Seq, Err: err}
	// Abort tells every other rank why, also when this endpoint already
	// failed by itself (a lost peer): a rank that has not noticed the loss
	// yet must not wait, nor mistake this rank's later Close or exit for
	// the cause. A rank aborted by another passes that abort on
	// unchanged. Abort returns once the peers' frames are written, so the
	// caller may exit as soon as this returns. Only a closed rank has
	// nothing to say.
	if !errors.Is(err, transport.ErrClosed) {
		e.c.ep.Abort(e.rootCause(ctx, rawPeer, chain, err, opErr))
	}
	return opErr
}

// describeChain ends the error of a wait that timed out: the ranks the
// peer waits for in turn (world ranks, see waitWatch.chain), and which
// rank is to blame.
func (c *Comm) describeChain(chain []int) string {
	if len(chain) == 0 {
		return ": the peer is slow, stuck, unreachable, or not calling this collective"
	}
	var b strings.Builder
	for _, w := range chain {
		fmt.Fprintf(&b, ", which is waiting for %s", c.shownWorld(w))
	}
	fmt.Fprintf(&b, ": %s is slow, stuck, unreachable, or not calling this collective", c.shownWorld(chain[len(chain)-1]))
	return b.String()
}

// shownWorld is how errors name world rank w: as a rank of the
// communicator the caller sees (shownRank), or as a world rank when it is
// not one of its members.
func (c *Comm) shownWorld(w int) string {
	shown := c
	if c.outer != nil {
		shown = c.outer
	}
	for i, m := range shown.members {
		if m == w {
			return "rank " + strconv.Itoa(i)
		}
	}
	return "world rank " + strconv.Itoa(w)
}

// rootCause is the abort cause of opErr, whose error err concerns the
// communicator's rank rawPeer (-1: none): a timeout waiting for a peer
// names that peer's world rank as the one that timed out, or the last rank
// of chain, the world ranks the peer waits for in turn; anything else the
// transport classifies from the error chain (core.RootCause).
func (e *execution) rootCause(ctx context.Context, rawPeer int, chain []int, err error, opErr error) error {
	var pe *transport.PeerError
	if errors.As(err, &pe) {
		return opErr
	}
	return e.c.rootCause(ctx, rawPeer, chain, err, opErr)
}

// rootCause is execution.rootCause for a wait that names its peer itself
// (the board's): a timeout blames the peer, or the last rank of chain.
func (c *Comm) rootCause(ctx context.Context, rawPeer int, chain []int, err error, opErr error) error {
	var remote *transport.RemoteAbortError
	if errors.As(err, &remote) || ctx.Err() == nil || rawPeer < 0 || rawPeer >= len(c.members) {
		return opErr
	}
	blamed := c.members[rawPeer]
	if len(chain) > 0 {
		blamed = chain[len(chain)-1]
	}
	return &transport.RankFailure{Rank: blamed, Kind: core.FailTimeout, Err: opErr}
}
