//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"context"
	"fmt"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

var _ backend.Capabilities = (*Comm)(nil)

// Supports reports the capabilities of the MPI backend: those of
// backend.BaseCapabilities, and RecvUpTo (a matched probe, then the
// receive of the message it matched).
func (c *Comm) Supports(cp backend.Capability) bool {
	return cp == backend.RecvUpTo || backend.BaseCapabilities(cp)
}

// recvUpTo is recv for a Request with UpTo: a matched probe
// (MPI_Improbe) learns the message's sender and length without taking
// any other receive's message, then MPI_Imrecv receives it, into
// req.Recv when it fits and otherwise into a scratch buffer, so that a
// message longer than the buffer is consumed too and fails with both
// lengths named (MPI alone would only say MPI_ERR_TRUNCATE). Until a
// message matches, nothing is posted and ctx ends the receive at once; a
// matched message is received even if ctx ends meanwhile, unless the wait
// for it is abandoned.
func (c *Comm) recvUpTo(ctx context.Context, req *backend.Request) error {
	peer, tag, _, err := c.p2pArgs(req, req.Recv)
	if err != nil {
		return c.opErr(req, req.Peer, err)
	}
	var msg C.MPI_Message
	var found, source, nbytes C.int
	var p poller
	done := ctx.Done()
	for {
		var rc C.int
		var failed error
		c.do(func() {
			rc, failed = c.startChecked(func() C.int {
				return C.gc_improbe(peer, tag, c.comm, &found, &msg, &source, &nbytes)
			})
		})
		if failed == nil {
			failed = mpiError("MPI_Improbe", rc)
		}
		if failed != nil {
			return c.opErr(req, req.Peer, failed)
		}
		if found != 0 {
			break
		}
		if err := c.stopped(ctx, done, nil); err != nil {
			return c.opErr(req, req.Peer, err)
		}
		p.pause()
	}
	from, got, es := int(source), int(nbytes), req.DType.Size()
	if got < 0 {
		return c.opErr(req, from, fmt.Errorf("comm: mpi backend: MPI_Get_count cannot say how long rank %d's message is", from))
	}
	dst, dt, count := req.Recv, dtypeCode(req.DType), got/es
	var fail error
	switch {
	case got%es != 0:
		// Not whole elements of this type: the sender sent another type.
		// Take the bytes, to consume the message, and say so.
		dst, dt, count = make([]byte, got), C.gcByte, got
		fail = fmt.Errorf("%w: rank %d sent %d bytes, not a whole number of %v elements", core.ErrMismatch, from, got, req.DType)
	case got > len(req.Recv):
		dst = make([]byte, got)
		fail = fmt.Errorf("%w: rank %d sent %d elements (%d bytes) but the receive buffer holds %d; the message was consumed and dropped",
			core.ErrLength, from, got/es, got, len(req.Recv)/es)
	}
	n, err := cint("count", count)
	if err != nil {
		return c.opErr(req, from, err)
	}
	r, err := newRequest(0)
	if err != nil {
		return c.opErr(req, from, err)
	}
	b := r.out(dst[:got])
	var rc C.int
	c.do(func() { rc = C.gc_imrecv(b, n, dt, &msg, r.c) })
	if err := mpiError("MPI_Imrecv", rc); err != nil {
		r.release()
		return c.opErr(req, from, err)
	}
	rc, err = c.wait(ctx, r)
	if err != nil {
		// A matched receive cannot be withdrawn: MPI keeps writing
		// into r's buffer, which stays pinned.
		r.abandon()
		return c.opErr(req, from, err)
	}
	r.complete(rc == C.MPI_SUCCESS)
	if err := mpiError("MPI_Imrecv", rc); err != nil {
		return c.opErr(req, from, err)
	}
	if fail != nil {
		return c.opErr(req, from, fail)
	}
	req.Source, req.Received = from, got
	return nil
}
