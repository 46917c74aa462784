package shmcoll

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/internal/release"
	"github.com/gocomm/comm/internal/transport"
)

// The board: small collectives of a world whose ranks all share one
// host's segment, without messages. Each rank owns a block of the
// segment's board area; a collective writes the rank's contribution into
// one of its two slots, stamps it, and reads the slots of the ranks it
// needs straight out of their blocks (one cache line or a few per rank,
// instead of a message through a ring each way and a schedule of steps).
// This is what the shared-memory collectives of MPI libraries do (Open
// MPI's coll/sm, MPICH's release/gather): for an 8-byte all-reduce of
// two ranks, two cache lines cross between the cores.
//
// Board operations are numbered from 1 on every rank alike (the engine
// runs them one at a time, in sequence-number order, and decides from
// arguments every rank shares which collectives use the board). Operation
// b uses slot b%2. A rank writes its slot for b only once every peer has
// finished operation b-2 (its done word), so a slot is never rewritten
// while a peer may still read it.
//
// A rank's block (boardBlockSize bytes, cache-line aligned):
//
//	+0    done: the number of board operations this rank has finished
//	+64   sleepers, wake: futex words of this rank's waits (see wait)
//	+128  entered: the sequence number and signature of the last
//	      collective this rank ran outside the board (Enter), for peers to
//	      tell a mismatch from a late rank
//	+192  slot 0: stamp (the operation's number, low 32 bits, and the
//	      payload's length above them, in one word: one release store
//	      publishes both), seq, signature (32 bytes), then BoardBytes of
//	      payload, the first 32 bytes of it in the header's cache line
//	      (an all-reduce of up to 8 float32s reads one line)
//	      slot 1: the same, from the next cache line
const (
	// BoardBytes is the largest contribution a board collective carries
	// per rank (the backend's limits per kind may be lower).
	BoardBytes = 16 << 10
	// MaxBoardRanks bounds the worlds that use a board: each rank reads
	// every peer's slot, which stops paying off among many ranks.
	MaxBoardRanks = 16

	boardHeader = 32
	// boardTouchBytes bounds the payloads whose lines a wait loads early
	// (Exchange's size). Above it, loading the lines on every poll was
	// slower than not: the polls take the lines from the writer while it
	// still copies into them.
	boardTouchBytes = 512
	// boardSharedCopy: from this size a rank writes its contribution
	// with stores that bypass its cache (kernel.CopyShared), as the
	// rings and the stage do: the peers read those lines two operations
	// ago, and plain stores wait for each line to be taken back from
	// their caches; below this size the plain copy is as fast.
	boardSharedCopy = 4 << 10
	boardSlotSize   = (boardHeader + BoardBytes + cacheLine - 1) / cacheLine * cacheLine
	boardBlockSize  = 3*cacheLine + 2*boardSlotSize
)

// The segment's words and blocks are aligned to these (transport lays
// the segment out).
const (
	cacheLine = transport.CacheLine
	shmPage   = transport.SegmentPage
)

// Areas is what a segment must set aside for the board and the stage
// (transport.SHMOptions.Areas).
var Areas = transport.SegmentAreas{MaxRanks: MaxBoardRanks, Board: boardBlockSize, Stage: stageBlockSize}

// word32 and word64 point at an aligned word of a mapping, for sync/atomic.
func word32(mem []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
func word64(mem []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }

// Board is the shared-memory board of an endpoint whose world is on one
// host (New). Its operations must be called one at a time.
type Board struct {
	seg   *transport.Areas
	n, me int
	blk   []boardBlock // by world rank (== local index: the world is local)
	count uint64       // board operations this rank has started
	// sawAll: the last operation read every peer's stamp, so every peer
	// had finished the one before it (a rank stamps operation b only
	// after its done word says b-1), and the next needs no done check.
	sawAll bool
	// waiting, if set, is told the rank a wait is for once it outlasts
	// the spinning (SetWaitHook).
	waiting func(rank int)
	st      stage  // the stage's state (see AllReduce)
	touched uint64 // the sum of Exchange's early loads (see there)
	fence   uint64 // a word for postedWake's fence

	// shared are the live shared allocations (shared.go), guarded by
	// the areas' mapping lock; descs, sharedDsts and sharedPieces are
	// AllReduceShared's, reused.
	shared       []*sharedMap
	descs        []sharedDesc
	sharedDsts   [][]byte
	sharedPieces [][]byte
}

// SetWaitHook has the board tell f the world rank each of its waits is
// for, once the wait outlasts its first spin (for the engine's record of
// whom this rank waits for). Set it before the first Exchange.
func (b *Board) SetWaitHook(f func(rank int)) { b.waiting = f }

// boardBlock holds pointers into one rank's block.
type boardBlock struct {
	done           *uint64
	sleepers, wake *uint32
	enteredSeq     *uint64
	enteredSig     [2]*uint64
	stamp, seq     [2]*uint64
	sig            [2][2]*uint64
	payload        [2][]byte
}

func boardBlockAt(mem []byte, off int) boardBlock {
	var b boardBlock
	b.done = word64(mem, off)
	b.sleepers, b.wake = word32(mem, off+cacheLine), word32(mem, off+cacheLine+4)
	b.enteredSeq = word64(mem, off+2*cacheLine)
	b.enteredSig = [2]*uint64{word64(mem, off+2*cacheLine+8), word64(mem, off+2*cacheLine+16)}
	for s := range 2 {
		h := off + 3*cacheLine + s*boardSlotSize
		b.stamp[s], b.seq[s] = word64(mem, h), word64(mem, h+8)
		b.sig[s] = [2]*uint64{word64(mem, h+16), word64(mem, h+24)}
		b.payload[s] = mem[h+boardHeader : h+boardHeader+BoardBytes : h+boardHeader+BoardBytes]
	}
	return b
}

// packSig and unpackSig store a signature in two words.
func packSig(s core.Signature) [2]uint64 {
	return [2]uint64{uint64(s.Kind) | uint64(s.DType)<<8 | uint64(s.Op)<<16 | uint64(s.Algo)<<24 | uint64(uint32(s.Root))<<32, s.Count}
}

func unpackSig(w [2]uint64) core.Signature {
	return core.Signature{Kind: core.Kind(w[0] & 0xff), DType: core.DType(w[0] >> 8 & 0xff), Op: core.Op(w[0] >> 16 & 0xff),
		Algo: uint8(w[0] >> 24), Root: int32(uint32(w[0] >> 32)), Count: w[1]}
}

// New builds the board of a world whose ranks all map one segment, over
// the segment's collective areas (set aside as Areas says), or returns
// nil when seg is nil (the endpoint has none: not every rank of the
// world shares this host's segment, or the world has more than
// MaxBoardRanks ranks).
func New(seg *transport.Areas) *Board {
	if seg == nil {
		return nil
	}
	n, me := seg.Size(), seg.Rank()
	b := &Board{seg: seg, n: n, me: me, blk: make([]boardBlock, n)}
	b.st.blk = make([]stageBlock, n)
	b.st.srcs = make([][]byte, n)
	b.st.mine = make([]byte, stageStripe)
	b.sharedPieces = make([][]byte, n)
	board, stage := seg.Board(), seg.Stage()
	for r := range n {
		b.blk[r] = boardBlockAt(board, r*boardBlockSize)
		b.st.blk[r] = stageBlockAt(stage, r*stageBlockSize)
	}
	transport.Prefault(board)
	transport.Prefault(stage)
	seg.OnClose(b.unmapPeers)
	return b
}

// Enter records that this rank runs the collective seq (of signature sig)
// outside the board, so that a peer waiting on the board for the same
// sequence number reports a mismatch instead of waiting out its timeout.
func (b *Board) Enter(seq uint64, sig core.Signature) {
	me := &b.blk[b.me]
	w := packSig(sig)
	atomic.StoreUint64(me.enteredSig[0], w[0])
	atomic.StoreUint64(me.enteredSig[1], w[1])
	atomic.StoreUint64(me.enteredSeq, seq)
	b.wakePeers()
}

// Exchange runs one board collective: it posts mine (at most BoardBytes)
// as this rank's contribution to the collective seq of signature sig,
// then calls read for the ranks whose contributions it needs, in rank
// order: every rank when from is negative, else only from. p is that
// rank's contribution as posted (this rank's too, from its slot: mine may
// be overwritten by then), as long as that rank posted; read must not
// keep it. Every rank of the world must call Exchange for the
// same collectives in the same order. A peer that posted another
// signature at seq, or ran seq outside the board, is a *core.MismatchError.
//
// size is the length of the contributions it reads, as far as this rank
// knows (len(mine) for an all-reduce; 0 when unknown): while it waits for
// a peer's stamp it also loads the other cache lines a contribution of
// that size fills, so that they arrive with the stamp's line instead of
// one cache miss after it (without it, an all-reduce of a few lines took
// measurably longer than one of a single line).
func (b *Board) Exchange(ctx context.Context, seq uint64, sig core.Signature, mine []byte, size, from int, read func(rank int, p []byte)) error {
	return b.ExchangeAfter(ctx, seq, sig, mine, size, from, nil, read)
}

// ExchangeAfter is Exchange, calling posted (unless nil) once before it
// first waits for a peer: after this rank's contribution is posted, or
// before it waits for the slot to be free (when the last exchange read
// only one rank's). What posted does overlaps the wait for the peers'
// parts instead of delaying this rank's (a lock there still waits for
// the stamp's store to reach the peers). posted is not called when
// Exchange fails before it may wait (the board closed or failed).
func (b *Board) ExchangeAfter(ctx context.Context, seq uint64, sig core.Signature, mine []byte, size, from int, posted func(), read func(rank int, p []byte)) error {
	if len(mine) > BoardBytes {
		return fmt.Errorf("comm: transport: %d bytes exceed the board's %d", len(mine), BoardBytes)
	}
	if err := b.seg.Hold(); err != nil {
		return err
	}
	defer b.seg.Release()
	b.count++
	op := b.count
	s := int(op & 1)
	me := &b.blk[b.me]
	w := boardWait{b: b, ctx: ctx, seq: seq, sig: sig}
	// Every peer must be done with operation op-2, the last one to use
	// this slot; known without looking when op-1 saw every peer's stamp.
	if op > 2 && !b.sawAll {
		if posted != nil {
			posted()
			posted = nil
		}
		for r := range b.n {
			if r != b.me {
				if err := w.until(r, false, func() bool { return atomic.LoadUint64(b.blk[r].done) >= op-2 }); err != nil {
					return err
				}
			}
		}
	}
	// Plain stores, then the stamp's release store: a peer that loads
	// the stamp sees everything stored before it. The stamp wakes no
	// sleeping peer here: a wake must follow a store-load fence (see
	// until's sleep), which would hold this core until the stamp's line
	// is taken from the peers polling it; the done word's atomic store
	// below is one, and a peer asleep on this rank has posted its own
	// stamp, so the wait below does not wait for it (failures wake
	// through postedWake).
	if len(mine) >= boardSharedCopy {
		kernel.CopyShared(me.payload[s], mine)
	} else {
		copy(me.payload[s], mine)
	}
	ws := packSig(sig)
	*me.seq[s], *me.sig[s][0], *me.sig[s][1] = seq, ws[0], ws[1]
	release.Store64(me.stamp[s], stampOf(op, len(mine)))
	if posted != nil {
		posted()
	}
	for r := range b.n {
		if from >= 0 && r != from {
			continue
		}
		p := &b.blk[r]
		if r != b.me {
			var pay []byte
			if size <= boardTouchBytes {
				pay = p.payload[s][:size]
			}
			if err := w.until(r, true, func() bool {
				ok := uint32(atomic.LoadUint64(p.stamp[s])) == uint32(op)
				// The loads of the payload's lines are issued beside the
				// stamp's; their values are not used (a line read before
				// the stamp is read again after it), only kept from the
				// compiler.
				for o := cacheLine - boardHeader; o < len(pay); o += cacheLine {
					b.touched += atomic.LoadUint64((*uint64)(unsafe.Pointer(&pay[o])))
				}
				return ok
			}); err != nil {
				return b.postedWake(err)
			}
			if err := w.check(r, s); err != nil {
				return b.postedWake(err)
			}
		}
		read(r, p.payload[s][:min(atomic.LoadUint64(p.stamp[s])>>32, BoardBytes)])
	}
	b.sawAll = from < 0
	atomic.StoreUint64(me.done, op)
	b.wakePeers()
	return nil
}

// stampOf is the stamp of operation op carrying n bytes: op's low 32
// bits (a wait compares them with the operation it waits for, at most
// two apart) and n above them.
func stampOf(op uint64, n int) uint64 { return uint64(uint32(op)) | uint64(n)<<32 }

// postedWake wakes the peers asleep on this rank after it posted an
// operation it then failed, and returns err: the wake that the done word
// would have brought.
func (b *Board) postedWake(err error) error {
	atomic.AddUint64(&b.fence, 1) // the store-load fence before the wake
	b.wakePeers()
	return err
}

// wakePeers wakes the peers asleep in a board wait (each then looks
// again at what it waits for).
func (b *Board) wakePeers() {
	for r := range b.n {
		if r != b.me && atomic.LoadUint32(b.blk[r].sleepers) != 0 {
			atomic.AddUint32(b.blk[r].wake, 1)
			transport.Wake(b.blk[r].wake)
		}
	}
}

// boardWait is one board operation's waiting.
type boardWait struct {
	b   *Board
	ctx context.Context
	seq uint64
	sig core.Signature
	bad error // a mismatch found while waiting
	// stage: a stage wait, for which a peer that entered seq with the
	// same signature is on the stage too, not a mismatch.
	stage bool
}

// mismatch reports whether rank r has run w's collective outside the
// board (for a stage wait: elsewhere than on the stage), recording the
// error.
func (w *boardWait) mismatch(r int) bool {
	p := &w.b.blk[r]
	if w.stage {
		// A stage operation's peer may have run seq on the board. With
		// the same signature it has only posted where its buffers are
		// (AllReduceShared), which the stage follows.
		for s := range 2 {
			if atomic.LoadUint64(p.stamp[s]) != 0 && atomic.LoadUint64(p.seq[s]) == w.seq {
				remote := unpackSig([2]uint64{atomic.LoadUint64(p.sig[s][0]), atomic.LoadUint64(p.sig[s][1])})
				if remote == w.sig {
					continue
				}
				w.bad = &core.MismatchError{Peer: r, Seq: w.seq, Local: w.sig, Remote: remote}
				return true
			}
		}
	}
	if atomic.LoadUint64(p.enteredSeq) != w.seq {
		return false
	}
	remote := unpackSig([2]uint64{atomic.LoadUint64(p.enteredSig[0]), atomic.LoadUint64(p.enteredSig[1])})
	if w.stage && remote == w.sig {
		return false
	}
	w.bad = &core.MismatchError{Peer: r, Seq: w.seq, Local: w.sig, Remote: remote}
	return true
}

// check verifies the slot rank r stamped for this operation.
func (w *boardWait) check(r, s int) error {
	if w.bad != nil {
		return w.bad
	}
	p := &w.b.blk[r]
	seq := atomic.LoadUint64(p.seq[s])
	remote := unpackSig([2]uint64{atomic.LoadUint64(p.sig[s][0]), atomic.LoadUint64(p.sig[s][1])})
	if remote != w.sig {
		return &core.MismatchError{Peer: r, Seq: w.seq, Local: w.sig, Remote: remote}
	}
	if seq != w.seq {
		return &core.PeerError{Peer: r, Err: fmt.Errorf("comm: transport: rank %d posted collective %d on the shared-memory board where this rank posted %d (%v): the ranks' board collectives are out of step",
			r, seq, w.seq, w.sig)}
	}
	return nil
}

// until waits until ready reports true, for rank r's sake: it polls, then
// yields the CPU between polls, then sleeps on this rank's wake word (every
// stamp and done a peer writes wakes it), as the rings' receives do. It
// returns early when ctx ends or the endpoint fails, and, with entered,
// when r has run the collective outside the board (w.bad is then set;
// that is looked at every 64th poll).
func (w *boardWait) until(r int, entered bool, ready func() bool) error {
	if ready() {
		return nil
	}
	seg := w.b.seg
	bo := seg.Backoff(w.stage)
	me := &w.b.blk[w.b.me]
	var done <-chan struct{}
	told := false
	for {
		if ready() {
			return nil
		}
		if seg.Failed() {
			// A peer that ran this collective with other arguments may
			// have aborted the world on seeing this rank's: say what this
			// rank sees, the mismatch, rather than the abort.
			if entered && w.mismatch(r) {
				return nil
			}
			return seg.Err()
		}
		phase := bo.Next()
		if phase != transport.PhaseSpin && !told && w.b.waiting != nil {
			told = true
			w.b.waiting(r)
		}
		if entered && (bo.Polls()&63 == 0 || phase == transport.PhaseSleep) && w.mismatch(r) {
			// r may have posted what this wait is for just before it
			// went on to run seq elsewhere (AllReduceShared's
			// descriptors, then the stage): that is no mismatch.
			if ready() {
				w.bad = nil
			}
			return nil
		}
		switch phase {
		case transport.PhaseSpin:
			continue
		case transport.PhaseYield:
			if bo.Polls()&63 == 0 {
				if err := w.gone(r); err != nil {
					return err
				}
			}
			bo.YieldCPU()
			continue
		}
		if done == nil {
			done = w.ctx.Done()
		}
		if err := w.gone(r); err != nil {
			return err
		}
		atomic.AddUint32(me.sleepers, 1)
		v := atomic.LoadUint32(me.wake)
		if !ready() {
			seg.Sleep(me.wake, v, boardSleep, done, r)
		}
		atomic.AddUint32(me.sleepers, ^uint32(0))
	}
}

// boardSleep bounds a board wait's sleep: a peer that closed its end
// (a goodbye) wakes nobody's board wait, so a sleeping wait looks at
// that (gone) at least this often.
const boardSleep = 10 * time.Millisecond

// gone returns why the wait for rank r must end, if it must: ctx ended,
// or r is gone (closed, or lost: its process died), which fails the
// endpoint as a receive from r would.
func (w *boardWait) gone(r int) error {
	if err := w.ctx.Err(); err != nil {
		return w.ended(r, err)
	}
	return w.b.seg.PeerErr(r)
}

// ended is the error of a board wait for rank r cut short by ctx.
func (w *boardWait) ended(r int, err error) error {
	return &core.PeerError{Peer: r, Err: fmt.Errorf("%w waiting on the shared-memory board for rank %d (%v, sequence %d)", err, r, w.sig, w.seq)}
}
