package comm

import (
	"context"
	"errors"

	"github.com/gocomm/comm/core"
)

// Send sends buf to rank dst of c with a tag. It returns once buf may be
// reused, which may be before dst has received it. Messages from one sender
// with one tag arrive in the order they were sent. The receiver's buffer must
// have the same length and type. A rank does not send to itself: dst ==
// c.Rank() fails at once with an *OpError wrapping ErrInvalid (copy the
// buffer instead), as a dst out of range or a negative tag do.
func Send[T Numeric](ctx context.Context, c *Comm, buf []T, dst, tag int) error {
	return startSend(ctx, c, buf, dst, tag).sync()
}

// StartSend is Send, asynchronous (isend).
func StartSend[T Numeric](ctx context.Context, c *Comm, buf []T, dst, tag int) *Work {
	return startSend[T](ctx, c, buf, dst, tag).async()
}

func startSend[T Numeric](ctx context.Context, c *Comm, buf []T, dst, tag int) *Work {
	if w := c.unusable(core.KindSend); w != nil {
		return w
	}
	req := c.request(core.KindSend, dtypeOf[T](), Sum, 0, asBytes(buf), nil)
	req.Peer, req.Tag, req.SigCount = dst, tag, len(buf)
	return c.startP2P(ctx, req, c.checkPeer(req.Kind, dst, false, tag))
}

// Recv receives into buf the next message with tag from rank src of c, or
// from any rank if src is AnySource, and returns the sender's rank. The
// message must have exactly len(buf) elements (else an error wrapping
// ErrLength); RecvUpTo takes shorter ones. A rank does not receive from
// itself: src == c.Rank() fails at once with an *OpError wrapping
// ErrInvalid.
func Recv[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) (int, error) {
	return startRecv(ctx, c, buf, src, tag).syncSource()
}

// StartRecv is Recv, asynchronous (irecv); the sender is Work.Source.
func StartRecv[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) *Work {
	return startRecv[T](ctx, c, buf, src, tag).async()
}

// RecvUpTo receives the next message with tag from rank src of c (or from
// any rank if src is AnySource) of at most len(buf) elements, as MPI_Recv
// and torch's recv do, and returns how many elements it had and who sent
// it (in the order of net.PacketConn.ReadFrom): the message is in buf[:n]
// and buf[n:] is untouched. The sender calls Send as usual.
//
// A message longer than buf fails the receive with an error wrapping
// ErrLength that names both lengths; the message is consumed and
// dropped (MPI_ERR_TRUNCATE), the communicator is not aborted, and later
// messages arrive as usual. The backend must support CapRecvUpTo (the
// native and mpi backends do); otherwise RecvUpTo fails at once with
// ErrInvalid. On error n is 0 and from -1. buf belongs to the receive
// until it returns.
//
// A pending receive from AnySource fails as soon as a peer is lost, as
// ULFM's MPI_ERR_PROC_FAILED_PENDING does, even if another rank could
// have sent the message. On the mpi backend, a ctx that ends after a
// message has matched (MPI_Improbe) abandons that message: it is not
// delivered to a later receive.
func RecvUpTo[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) (n, from int, err error) {
	from, n, err = startRecvUpTo(ctx, c, buf, src, tag).syncRecv()
	if err != nil {
		return 0, -1, err
	}
	return n, from, nil
}

// StartRecvUpTo is RecvUpTo, asynchronous: the count is Work.Count and
// the sender Work.Source once it is done.
func StartRecvUpTo[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) *Work {
	return startRecvUpTo(ctx, c, buf, src, tag).async()
}

func startRecvUpTo[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) *Work {
	if w := c.unusable(core.KindRecv); w != nil {
		return w
	}
	req := c.request(core.KindRecv, dtypeOf[T](), Sum, 0, nil, asBytes(buf))
	req.Peer, req.Tag, req.SigCount, req.UpTo = src, tag, len(buf), true
	err := c.checkPeer(req.Kind, src, true, tag)
	if err == nil && c.be != nil && !c.Supports(CapRecvUpTo) {
		err = invalid(req.Kind, "RecvUpTo: backend %q cannot receive a message shorter than the buffer (see Comm.Supports(CapRecvUpTo)); use Recv with a buffer of the message's length", c.Backend())
	}
	return c.startP2P(ctx, req, err)
}

func startRecv[T Numeric](ctx context.Context, c *Comm, buf []T, src, tag int) *Work {
	if w := c.unusable(core.KindRecv); w != nil {
		return w
	}
	req := c.request(core.KindRecv, dtypeOf[T](), Sum, 0, nil, asBytes(buf))
	req.Peer, req.Tag, req.SigCount = src, tag, len(buf)
	return c.startP2P(ctx, req, c.checkPeer(req.Kind, src, true, tag))
}

func (c *Comm) checkPeer(kind core.Kind, peer int, anyOK bool, tag int) error {
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

// StartBatchSendRecv starts every op of the batch at once (torch's
// batch_isend_irecv) and returns one Work that completes when all have; its
// error joins the failures.
func StartBatchSendRecv[T Numeric](ctx context.Context, c *Comm, ops []P2POp[T]) *Work {
	if err := c.usable("StartBatchSendRecv"); err != nil {
		return failed(err)
	}
	works := make([]*Work, len(ops))
	for i, op := range ops {
		if op.Send {
			works[i] = StartSend(ctx, c, op.Buf, op.Peer, op.Tag)
		} else {
			if op.Peer == AnySource {
				works[i] = failed(invalid(core.KindRecv, "batched receives need a source rank, not AnySource"))
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
