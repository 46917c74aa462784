package comm

import (
	"context"
	"errors"

	"github.com/gocomm/comm/backend"
)

// Send sends buf to rank dst of c with a tag. It returns once buf may be
// reused, which may be before dst has received it. Messages from one sender
// with one tag arrive in the order they were sent. The receiver's buffer must
// have the same length and type.
func Send[T Numeric](ctx context.Context, c *Comm, buf []T, dst, tag int) error {
	return startSend(ctx, c, buf, dst, tag).sync()
}

// StartSend is Send, asynchronous (isend).
func StartSend[T Numeric](ctx context.Context, c *Comm, buf []T, dst, tag int) *Work {
	return startSend[T](ctx, c, buf, dst, tag).async()
}

func startSend[T Numeric](ctx context.Context, c *Comm, buf []T, dst, tag int) *Work {
	req := c.request(backend.KindSend, dtypeOf[T](), Sum, 0, asBytes(buf), nil)
	req.Peer, req.Tag, req.SigCount = dst, tag, len(buf)
	return c.startP2P(ctx, req, c.checkPeer(req.Kind, dst, false, tag))
}

// Recv receives into buf the next message with tag from rank src of c, or
// from any rank if src is AnySource, and returns the sender's rank.
func Recv[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) (int, error) {
	return startRecv(ctx, c, buf, src, tag).syncSource()
}

// StartRecv is Recv, asynchronous (irecv); the sender is Work.Source.
func StartRecv[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) *Work {
	return startRecv[T](ctx, c, buf, src, tag).async()
}

func startRecv[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) *Work {
	req := c.request(backend.KindRecv, dtypeOf[T](), Sum, 0, nil, asBytes(buf))
	req.Peer, req.Tag, req.SigCount = src, tag, len(buf)
	return c.startP2P(ctx, req, c.checkPeer(req.Kind, src, true, tag))
}

func (c *Comm) checkPeer(kind backend.Kind, peer int, anyOK bool, tag int) error {
	switch {
	case tag < 0:
		return invalid(kind, "tag %d is negative", tag)
	case peer == AnySource && anyOK:
		return nil
	case peer < 0 || peer >= c.size:
		return invalid(kind, "peer rank %d out of range [0,%d)", peer, c.size)
	case peer == c.rank:
		return invalid(kind, "peer rank %d is this rank; gocomm does not send to itself (copy instead)", peer)
	}
	return nil
}

// P2POp is one send or receive of a batch (torch's P2POp).
type P2POp[T Numeric] struct {
	Send bool // true: send Buf to Peer; false: receive Buf from Peer
	Buf  []T
	Peer int // rank of the communicator (no AnySource in batches)
	Tag  int
}

// BatchSendRecv starts every op of the batch at once (torch's
// batch_isend_irecv) and returns one Work that completes when all have; its
// error joins the failures.
func BatchSendRecv[T Numeric](ctx context.Context, c *Comm, ops []P2POp[T]) *Work {
	works := make([]*Work, len(ops))
	for i, op := range ops {
		if op.Send {
			works[i] = StartSend(ctx, c, op.Buf, op.Peer, op.Tag)
		} else {
			if op.Peer == AnySource {
				works[i] = failed(invalid(backend.KindRecv, "batched receives need a source rank, not AnySource"))
				continue
			}
			works[i] = StartRecv(ctx, c, op.Buf, op.Peer, op.Tag)
		}
	}
	w := &Work{done: make(chan struct{}), source: -1}
	go func() {
		defer close(w.done)
		errs := make([]error, len(works))
		for i, x := range works {
			errs[i] = x.Wait()
		}
		w.err = errors.Join(errs...)
	}()
	return w
}
