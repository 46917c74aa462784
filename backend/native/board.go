package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/internal/turn"
	"github.com/gocomm/comm/transport"
)

// Small collectives of a world on one host run on the shared-memory board
// (transport.Board): every rank posts its contribution in its own slot of
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
// (transport.BoardBytes bounds them all); above, all-reduces run on the
// stage and the others on schedules. Measured against those, binaries
// alternating, 2 KiB-16 KiB, 2 ranks and 4 ranks on 2 CPUs
// (docs/results/2026-11-27/board-sizes): the board's single
// synchronisation wins wherever every rank reads every contribution
// anyway (all-reduce to 8 KiB: 4 ranks 29-33 -> 19-24 us, 2 ranks alike
// or better; all-gather to 16 KiB: 2 ranks 4-16 KiB 4.0-5.6 -> 1.5-3.2
// us, 4 ranks 8-16 KiB 89 -> 17-19 us), and loses where one rank reads
// them all (a 2-rank reduce from 4 KiB, 1.4-2.6 -> 1.9-3.6 us) or where
// the schedules let the root run ahead (a 4-rank broadcast of 2-16 KiB,
// 2.7-6.0 -> 11-12 us: the board's root waits, every second operation,
// until every rank has read its slot).
const (
	boardAllReduceMax = 8 << 10
	boardReduceMax    = 2 << 10
	boardBroadcastMax = 1 << 10
	boardAllGatherMax = transport.BoardBytes
)

// boardEligible reports whether req runs on the board: all-reduce,
// reduce, broadcast, all-gather and barrier, up to their limits above,
// no algorithm forced, no user-defined op.
func boardEligible(c *Comm, req *backend.Request) bool {
	if req.Algorithm != algo.Auto || req.User != nil || c.cfg.Algorithms.For(req.Kind) != algo.Auto {
		return false
	}
	switch req.Kind {
	case backend.KindAllReduce:
		return len(req.Recv) <= boardAllReduceMax
	case backend.KindBroadcast:
		return len(req.Recv) <= boardBroadcastMax
	case backend.KindReduce:
		return len(req.Send) <= boardReduceMax
	case backend.KindAllGather:
		return len(req.Send) <= boardAllGatherMax
	case backend.KindBarrier:
		return true
	}
	return false
}

// stageEligible reports whether req runs on the board's stage
// (transport.Board.AllReduce): an all-reduce above the board's limit, no
// algorithm forced, no user-defined op.
func stageEligible(c *Comm, req *backend.Request) bool {
	return req.Kind == backend.KindAllReduce && len(req.Recv) > boardAllReduceMax &&
		req.Algorithm == algo.Auto && req.User == nil && c.cfg.Algorithms.For(req.Kind) == algo.Auto
}

// runOnStage runs the all-reduce req on the board's stage, or in place
// when every rank's buffers are shared allocations (shared.go).
func (c *Comm) runOnStage(ctx context.Context, req *backend.Request) error {
	req.Used = algo.SharedStage
	defer c.waits.done()
	dt, op := req.DType, req.Op
	fold := func(dst []byte, srcs [][]byte) error { return kernel.ReduceAll(dt, op, dst, srcs) }
	sig := boardSig(req, algo.SharedStage)
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
	if err == nil && op == backend.Avg {
		err = kernel.Divide(dt, req.Recv, c.size)
	}
	if err != nil {
		return c.boardError(ctx, req, err)
	}
	return nil
}

// boardSig is the signature a board collective posts: the schedules'
// fields, with the board as the algorithm.
func boardSig(req *backend.Request, a algo.Algorithm) transport.Signature {
	return transport.Signature{Kind: req.Kind, DType: req.DType, Op: req.Op, Algo: uint8(a),
		Root: int32(req.Root), Count: uint64(req.SigCount)}
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
	case backend.KindAllReduce:
		dst := req.Recv
		err = c.board.Exchange(ctx, req.Seq, sig, req.Send, len(req.Send), -1, func(r int, p []byte) {
			if r == 0 {
				copy(dst, p)
			} else if rerr == nil {
				rerr = kernel.Reduce(req.DType, req.Op, dst, p)
			}
		})
		if err == nil && rerr == nil && req.Op == backend.Avg {
			rerr = kernel.Divide(req.DType, dst, c.size)
		}
	case backend.KindReduce:
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
		if err == nil && rerr == nil && req.Op == backend.Avg && c.rank == req.Root {
			rerr = kernel.Divide(req.DType, dst, c.size)
		}
	case backend.KindBroadcast:
		var mine []byte
		if c.rank == req.Root {
			mine = req.Recv
		}
		err = c.board.Exchange(ctx, req.Seq, sig, mine, len(req.Recv), req.Root, func(r int, p []byte) {
			if r != c.rank {
				copy(req.Recv, p)
			}
		})
	case backend.KindAllGather:
		n := len(req.Send)
		err = c.board.Exchange(ctx, req.Seq, sig, req.Send, n, -1, func(r int, p []byte) {
			copy(req.Recv[r*n:(r+1)*n], p)
		})
	case backend.KindBarrier:
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
	opErr := &backend.OpError{Op: req.Kind, Rank: c.rank, Peer: peer, Seq: req.Seq, Err: err}
	if !errors.Is(err, transport.ErrClosed) {
		c.ep.Abort(c.rootCause(ctx, peer, chain, err, opErr))
	}
	return opErr
}
