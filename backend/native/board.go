package native

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/internal/shmcoll"
	"github.com/gocomm/comm/internal/transport"
	"github.com/gocomm/comm/internal/turn"
)

// Small collectives of a world on one host run on the shared-memory board
// (shmcoll.Board): every rank posts its contribution in its own slot of
// the host's segment and reads the others' straight out of theirs, with no
// message, schedule or plan. Measured against the schedules, see
// boardKinds.
//
// Which collectives use the board depends only on arguments every rank
// shares (kind, size, algorithm, op), as schedules do. The board runs its
// operations one at a time, numbered alike on every rank, so a world with
// a board starts its collectives in sequence-number order (turn): a
// collective whose predecessor has not reached the backend yet (Start
// forms on several goroutines) waits for it to start.

// The largest contribution per rank that runs on the board, by kind
// (shmcoll.BoardBytes bounds them all); above, all-reduces run on the
// stage and the others on schedules. The board's single synchronisation
// wins wherever every rank reads every contribution anyway (all-reduce,
// all-gather), and loses where one rank reads them all (a reduce) or
// where the schedules let the root run ahead (a broadcast: the board's
// root waits, every second operation, until every rank has read its
// slot). The limits were measured against the schedules with commbench
// (see docs/tuning.md).
const (
	boardAllReduceMax = 8 << 10
	boardReduceMax    = 2 << 10
	boardBroadcastMax = 1 << 10
	boardAllGatherMax = shmcoll.BoardBytes
)

// boardEligible reports whether req runs on the board: all-reduce,
// reduce, broadcast, all-gather and barrier, up to their limits above,
// no algorithm forced, no user-defined op.
func boardEligible(c *Comm, req *backend.Request) bool {
	if !unforced(c, req) {
		return false
	}
	switch req.Kind {
	case core.KindAllReduce:
		return len(req.Recv) <= boardAllReduceMax
	case core.KindBroadcast:
		return len(req.Recv) <= boardBroadcastMax
	case core.KindReduce:
		return len(req.Send) <= boardReduceMax
	case core.KindAllGather:
		return len(req.Send) <= boardAllGatherMax
	case core.KindBarrier:
		return true
	}
	return false
}

// stageEligible reports whether req runs on the board's stage: an
// all-reduce above the board's limit (shmcoll.Board.AllReduce), a
// broadcast from its limits below (Board.Broadcast), an all-to-all of even
// counts (Board.AllToAll), an all-gather above the board's limit
// (Board.AllGather), a reduce-scatter of even counts
// (Board.ReduceScatter), and the V forms of all-gather and reduce-scatter
// (Board.AllGatherV, Board.ReduceScatterV) of any counts but none; no
// algorithm forced, no user-defined op. The decision rests on what every
// rank's call holds alike (kind, counts, total length), so that every
// rank takes the same path.
func stageEligible(c *Comm, req *backend.Request) bool {
	var ok bool
	switch req.Kind {
	case core.KindAllReduce:
		ok = len(req.Recv) > boardAllReduceMax
	case core.KindBroadcast:
		ok = len(req.Recv) >= stageBroadcastMin || c.manyPerCPU && len(req.Recv) >= stageBroadcastCrowdedMin
	case core.KindAllToAll, core.KindReduceScatter:
		ok = len(req.Recv) > 0
	case core.KindAllGather:
		ok = len(req.Send) > boardAllGatherMax
	case core.KindAllGatherV, core.KindReduceScatterV:
		ok = slices.ContainsFunc(req.Counts, func(n int) bool { return n > 0 })
	}
	return ok && unforced(c, req)
}

// unforced reports whether req leaves the schedule to gocomm: no
// algorithm forced, by the call or the configuration, and no user-defined
// op (the board and the stage fold with the kernels).
func unforced(c *Comm, req *backend.Request) bool {
	return req.Algorithm == algo.Auto && req.User == nil && c.cfg.Algorithms.For(req.Kind) == algo.Auto
}

// stageBroadcastMin and stageBroadcastCrowdedMin are the smallest
// broadcasts that run on the stage, with a CPU per rank and with more
// ranks than CPUs; below them the schedules through the rings are as fast
// or faster. All-to-all, all-gather (from the board's limit) and
// reduce-scatter were as fast or faster on the stage at every size
// measured, so they have no such bound (commbench, rings against stage;
// see docs/tuning.md).
const (
	stageBroadcastMin        = 1 << 20
	stageBroadcastCrowdedMin = 128 << 10
)

// runOnStage runs req on the board's stage; an all-reduce runs in place
// when every rank's buffers are shared allocations (shared.go).
func (c *Comm) runOnStage(ctx context.Context, req *backend.Request) error {
	req.Used = algo.SharedStage
	defer c.waits.done()
	sig := boardSig(req, algo.SharedStage)
	var err error
	switch req.Kind {
	case core.KindBroadcast:
		err = c.board.Broadcast(ctx, req.Seq, sig, req.Root, req.Recv)
	case core.KindAllToAll:
		err = c.board.AllToAll(ctx, req.Seq, sig, req.Send, req.Recv)
	case core.KindAllGather:
		err = c.board.AllGather(ctx, req.Seq, sig, req.Send, req.Recv)
	case core.KindReduceScatter:
		err = c.board.ReduceScatter(ctx, req.Seq, sig, req.Send, req.Recv, req.DType.Size(), stageFold(req))
	case core.KindAllGatherV:
		err = c.board.AllGatherV(ctx, req.Seq, sig, req.Send, req.Recv, req.Counts, req.DType.Size())
	case core.KindReduceScatterV:
		err = c.board.ReduceScatterV(ctx, req.Seq, sig, req.Send, req.Recv, req.Counts, req.DType.Size(), stageFold(req))
	default:
		err = c.allReduceOnStage(ctx, req, sig)
	}
	if err == nil && req.Op == core.Avg && (req.Kind == core.KindAllReduce || req.Kind == core.KindReduceScatter || req.Kind == core.KindReduceScatterV) {
		err = kernel.Divide(req.DType, req.Recv, c.size)
	}
	if err != nil {
		return c.boardError(ctx, req, err)
	}
	return nil
}

// allReduceOnStage runs the all-reduce req on the stage, or in place.
func (c *Comm) allReduceOnStage(ctx context.Context, req *backend.Request, sig transport.Signature) error {
	dt, fold := req.DType, stageFold(req)
	var ran bool
	var err error
	if c.sharedAllocs.Load() {
		// Every rank has made a shared allocation (AllocShared is a
		// collective), so every rank asks here.
		if ran, err = c.board.AllReduceShared(ctx, req.Seq, sig, req.Send, req.Recv, dt.Size(), fold); ran {
			req.Used = algo.SharedDirect
		}
	}
	if !ran {
		err = c.board.AllReduce(ctx, req.Seq, sig, req.Send, req.Recv, dt.Size(), fold)
	}
	return err
}

// stageFold is the fold of req's reduction for the stage.
func stageFold(req *backend.Request) shmcoll.Fold {
	dt, op := req.DType, req.Op
	return func(dst, out []byte, srcs [][]byte) error {
		if out != nil {
			return kernel.ReduceAllOut(dt, op, dst, out, srcs)
		}
		return kernel.ReduceAll(dt, op, dst, srcs)
	}
}

// boardSig is the signature a board collective posts: the schedules'
// fields, with the board as the algorithm.
func boardSig(req *backend.Request, a algo.Algorithm) transport.Signature {
	return transport.Signature{Kind: req.Kind, DType: req.DType, Op: req.Op, Algo: uint8(a),
		Root: int32(req.Root), Count: uint64(req.SigCount)}
}

// InlinesAllReduce implements backend.Inliner: an all-reduce of n bytes
// runs on the board (boardEligible).
func (c *Comm) InlinesAllReduce(n int) bool {
	return c.board != nil && n <= boardAllReduceMax && c.cfg.Algorithms.For(core.KindAllReduce) == algo.Auto
}

// InlineAllReduce implements backend.Inliner: runOnBoard for an all-reduce
// InlinesAllReduce accepted, without a Request but for its errors.
func (c *Comm) InlineAllReduce(ctx context.Context, timeout time.Duration, seq uint64, dt core.DType, op core.Op, send, recv []byte, count int, rec backend.InlineRecorder) (bool, error) {
	if c.isClosed() || !c.turn.Ready(seq) {
		return false, nil
	}
	// seq holds the turn: no other operation runs here until Advance,
	// and the turn's context is this one's until then (defers run last
	// in first out).
	defer c.turn.Advance(seq)
	defer c.waits.done()
	if _, ok := ctx.Deadline(); !ok {
		o := c.turnCtx.Get(ctx, timeout)
		defer c.turnCtx.Put(o)
		ctx = o
	}
	sig := transport.Signature{Kind: core.KindAllReduce, DType: dt, Op: op, Algo: uint8(algo.SharedBoard), Count: uint64(count)}
	var posted func()
	if rec != nil {
		posted = func() { rec.InlineEntered(seq, dt, op, len(recv)) }
	}
	err := c.boardAllReduce(ctx, seq, sig, dt, op, send, recv, posted)
	if err != nil {
		req := &backend.Request{Kind: core.KindAllReduce, Seq: seq, DType: dt, Op: op, Peer: -1, Send: send, Recv: recv, SigCount: count, Source: -1}
		err = c.boardError(ctx, req, err)
	}
	if rec != nil {
		rec.InlineExited(seq, dt, op, len(recv), err)
	}
	return true, err
}

// boardAllReduce runs the all-reduce seq (of signature sig) on the board:
// every rank's contribution folded in rank order into recv. posted, unless
// nil, runs once this rank's part is posted (Board.ExchangeAfter).
func (c *Comm) boardAllReduce(ctx context.Context, seq uint64, sig transport.Signature, dt core.DType, op core.Op, send, recv []byte, posted func()) error {
	var rerr error
	err := c.board.ExchangeAfter(ctx, seq, sig, send, len(send), -1, posted, func(r int, p []byte) {
		if r == 0 {
			copy(recv, p)
		} else if rerr == nil {
			rerr = kernel.Reduce(dt, op, recv, p)
		}
	})
	if err == nil && rerr == nil && op == core.Avg {
		rerr = kernel.Divide(dt, recv, c.size)
	}
	if err == nil {
		err = rerr
	}
	return err
}

// runOnBoard runs req on the board if it is one of its collectives
// (done), else records that this rank runs req's sequence number
// elsewhere. Either way the next collective may start when it returns.
func (c *Comm) runOnBoard(ctx context.Context, req *backend.Request) (done bool, err error) {
	if err := c.turn.Wait(ctx, req.Seq, c.Failed(), nil, nil); err != nil {
		if h, ok := c.ep.(*transport.Hybrid); ok && err == turn.ErrFailed {
			err = h.Err()
		}
		return true, c.opError(req, err)
	}
	defer c.turn.Advance(req.Seq)
	if stageEligible(c, req) {
		return true, c.runOnStage(ctx, req)
	}
	if !boardEligible(c, req) {
		a := req.Algorithm
		if a == algo.Auto {
			a = c.cfg.Algorithms.For(req.Kind)
		}
		c.board.Enter(req.Seq, boardSig(req, a))
		return false, nil
	}
	req.Used = algo.SharedBoard
	sig := boardSig(req, algo.SharedBoard)
	defer c.waits.done()
	var rerr error
	switch req.Kind {
	case core.KindAllReduce:
		err = c.boardAllReduce(ctx, req.Seq, sig, req.DType, req.Op, req.Send, req.Recv, nil)
	case core.KindReduce:
		// Every rank posts; the root folds them in rank order, the others
		// read only their own slot (nothing to wait for).
		from := c.rank
		if c.rank == req.Root {
			from = -1
		}
		dst := req.Recv
		err = c.board.Exchange(ctx, req.Seq, sig, req.Send, len(req.Send), from, func(r int, p []byte) {
			switch {
			case c.rank != req.Root:
			case r == 0:
				copy(dst, p)
			case rerr == nil:
				rerr = kernel.Reduce(req.DType, req.Op, dst, p)
			}
		})
		if err == nil && rerr == nil && req.Op == core.Avg && c.rank == req.Root {
			rerr = kernel.Divide(req.DType, dst, c.size)
		}
	case core.KindBroadcast:
		var mine []byte
		if c.rank == req.Root {
			mine = req.Recv
		}
		err = c.board.Exchange(ctx, req.Seq, sig, mine, len(req.Recv), req.Root, func(r int, p []byte) {
			if r != c.rank {
				copy(req.Recv, p)
			}
		})
	case core.KindAllGather:
		n := len(req.Send)
		err = c.board.Exchange(ctx, req.Seq, sig, req.Send, n, -1, func(r int, p []byte) {
			copy(req.Recv[r*n:(r+1)*n], p)
		})
	case core.KindBarrier:
		err = c.board.Exchange(ctx, req.Seq, sig, nil, 0, -1, func(int, []byte) {})
	}
	if err == nil {
		err = rerr
	}
	if err != nil {
		return true, c.boardError(ctx, req, err)
	}
	return true, nil
}

// boardError is err of a board collective as the operation's error,
// naming the peer it concerns if there is one, and aborts the world with
// it as the schedules' failures do (execution.fail): the peers must not
// wait for this rank. A wait that timed out names the rank at the end of
// the chain of waits it is part of.
func (c *Comm) boardError(ctx context.Context, req *backend.Request, err error) error {
	peer := -1
	var pe *core.PeerError
	var me *core.MismatchError
	switch {
	case errors.As(err, &me):
		peer = me.Peer
	case errors.As(err, &pe):
		peer = pe.Peer
	}
	var chain []int
	if ctx.Err() != nil && peer >= 0 && !errors.Is(err, transport.ErrAborted) {
		chain = c.waits.chain(c.members[c.rank], c.members[peer])
		err = fmt.Errorf("%w%s", err, c.describeChain(chain))
	}
	opErr := &core.OpError{Op: req.Kind, Rank: c.rank, Peer: peer, Seq: req.Seq, Err: err}
	if !errors.Is(err, transport.ErrClosed) {
		c.ep.Abort(c.rootCause(ctx, peer, chain, err, opErr))
	}
	return opErr
}
