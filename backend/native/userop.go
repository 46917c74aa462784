package native

import (
	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
)

// User-defined ops (backend.UserOp). A commutative one runs on whatever
// algorithm the cost model or the caller chooses, hierarchical included.
// A non-commutative one runs on a plan that folds in rank order
// (algo.KeepsOrder): the flat choice, replaced by algo.InOrder's when it
// does not keep the order, and never the hierarchical form (hosts need not
// hold contiguous ranks). Either way a reducing receive is combined with
// the received data as the left operand when it comes from a lower rank,
// so that both ends of a recursive-doubling exchange compute the same
// bits, and the rank-ordered plans get r0 ⊕ r1 ⊕ ... ⊕ rN-1.

// inRankOrder reports whether req needs a plan that keeps rank order.
func inRankOrder(req *backend.Request) bool {
	return req.User != nil && !req.User.Commutative
}

// inOrderChoice is the algorithm of a request that needs rank order.
func (c *Comm) inOrderChoice(req *backend.Request) algo.Algorithm {
	return algo.InOrder(req.Kind, c.flatChoice(req), req.Root)
}

// reduceUser finishes a reducing receive of got from peer with u: dst =
// dst ⊕ got, or, where dst still stands for the caller's input src (non-
// nil), dst = src ⊕ got; got first when it comes from a lower rank. got is
// the execution's scratch, so it may be overwritten.
func (e *execution) reduceUser(u *backend.UserOp, peer int, dst, src, got []byte) error {
	left := src
	if left == nil {
		left = dst
	}
	if peer < e.c.rank {
		if err := u.Reduce(got, left); err != nil {
			return err
		}
		copy(dst, got)
		return nil
	}
	if src != nil {
		copy(dst, src)
	}
	return u.Reduce(dst, got)
}

var _ backend.UserOpRunner = (*Comm)(nil)

// UserOps returns nil: the native backend runs user-defined ops on every
// reducing collective.
func (c *Comm) UserOps() error { return nil }
