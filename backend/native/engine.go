package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/transport"
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
}

func (c *Comm) newExecution(req *backend.Request, used algo.Algorithm) *execution {
	return &execution{
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
		sendOrd: make([]int, c.size),
		recvOrd: make([]int, c.size),
	}
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
	maxReduce := 0
	for _, st := range plan.Steps {
		for _, x := range st.Recvs {
			if x.Reduce && x.Len > maxReduce {
				maxReduce = x.Len
			}
		}
	}
	if maxReduce > 0 {
		e.scratch = kernel.Alloc(maxReduce * e.esize)
	}
	// Some plans use room beyond the operation's layout (plan.Scratch
	// elements past the end of Work); give them a larger work buffer and
	// copy the layout back afterwards.
	layout := e.work
	if plan.Scratch > 0 {
		e.work = kernel.Alloc(len(layout) + plan.Scratch*e.esize)
		copy(e.work, layout)
	}
	for i, st := range plan.Steps {
		if err := e.step(ctx, i, st); err != nil {
			return err
		}
	}
	if plan.Scratch > 0 {
		copy(layout, e.work)
		e.work = layout
	}
	return nil
}

func (e *execution) step(ctx context.Context, i int, st algo.Step) error {
	for _, cp := range st.Copies {
		copy(e.span(algo.Work, cp.ToOff, cp.Len), e.span(cp.From, cp.FromOff, cp.Len))
	}
	if len(st.Sends) == 0 && len(st.Recvs) == 0 {
		return nil
	}
	for _, x := range st.Sends {
		e.sendOrd[x.Peer] = 0
	}
	for _, x := range st.Recvs {
		e.recvOrd[x.Peer] = 0
	}
	// Receives run on this goroutine so that the first one is posted at
	// once (large payloads then land straight in the work buffer); sends
	// run beside them. Peers' reader goroutines always drain, so a send
	// never waits for the matching receive to be posted.
	var sendDone chan error
	if len(st.Sends) > 0 {
		if len(st.Recvs) == 0 {
			return e.sends(ctx, i, st.Sends)
		}
		sendDone = make(chan error, 1)
		go func() { sendDone <- e.sends(ctx, i, st.Sends) }()
	}
	var err error
	for _, x := range st.Recvs {
		if err = e.recv(ctx, i, x); err != nil {
			break
		}
	}
	if sendDone != nil {
		if serr := <-sendDone; err == nil {
			err = serr
		}
	}
	return err
}

// tag numbers a message by its step and its ordinal among the messages
// between the same two ranks in that step.
func (e *execution) tag(step, ord int) uint64 { return uint64(step)<<32 | uint64(ord) }

func (e *execution) sends(ctx context.Context, step int, xs []algo.Xfer) error {
	for _, x := range xs {
		h := e.hdr
		h.Tag = e.tag(step, e.sendOrd[x.Peer])
		e.sendOrd[x.Peer]++
		if err := e.c.ep.Send(ctx, e.c.members[x.Peer], h, e.span(x.Buf, x.Off, x.Len)); err != nil {
			return e.fail(ctx, x.Peer, step, "sending to", err)
		}
	}
	return nil
}

func (e *execution) recv(ctx context.Context, step int, x algo.Xfer) error {
	h := e.hdr
	h.Tag = e.tag(step, e.recvOrd[x.Peer])
	e.recvOrd[x.Peer]++
	dst := e.span(algo.Work, x.Off, x.Len)
	into := dst
	if x.Reduce {
		into = e.scratch[:len(dst)]
	}
	if _, err := e.c.ep.Recv(ctx, e.c.members[x.Peer], h, into); err != nil {
		return e.fail(ctx, x.Peer, step, "waiting for", err)
	}
	if x.Reduce {
		if err := kernel.Reduce(e.req.DType, e.req.Op, dst, into); err != nil {
			return e.fail(ctx, -1, step, "reducing", err)
		}
	}
	return nil
}

// fail turns a transport error into an *backend.OpError and aborts the world
// unless the failure already is an abort.
func (e *execution) fail(ctx context.Context, peer, step int, doing string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, transport.ErrAborted) {
		err = fmt.Errorf("%w at step %d %s rank %d (%s): the peer is slow, stuck, or not calling this collective",
			ctxErr, step, doing, peer, e.hdr.Sig)
	}
	opErr := &backend.OpError{Op: e.req.Kind, Rank: e.c.rank, Peer: peer, Seq: e.req.Seq, Err: err}
	if !errors.Is(err, transport.ErrAborted) && !errors.Is(err, transport.ErrClosed) {
		e.c.ep.Abort(opErr)
	}
	return opErr
}
