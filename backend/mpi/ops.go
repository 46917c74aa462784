//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/clock"
	"github.com/gocomm/comm/internal/kernel"
)

// collective runs a collective: prepare it, wait for its turn, then run
// it with the blocking MPI function (runBlocking) or start the
// nonblocking one and wait for MPI to complete it; finish an Avg. Any
// failure after the turn aborts the world, since the other ranks are
// inside the same collective.
func (c *Comm) collective(ctx context.Context, req *backend.Request) error {
	var k call
	if err := c.prepare(&k, req, c.blocking(req)); err != nil {
		opErr := c.opErr(req, -1, err)
		c.w.abort(opErr)
		return opErr
	}
	if err := c.waitTurn(ctx, req.Seq); err != nil {
		k.release()
		return c.fail(req, -1, err, "waiting for its turn to start")
	}
	if k.blocking {
		return c.runBlocking(ctx, req, &k)
	}
	var rc C.int
	var failed error
	if c.w.funneled {
		kk := k // k stays on the stack: only this copy escapes into the closure
		c.w.p.onThread(func() { rc, failed = c.startColl(&kk) })
	} else {
		rc, failed = c.startColl(&k)
	}
	c.advance(req.Seq)
	if failed != nil {
		k.r.release()
		return c.opErr(req, -1, failed)
	}
	if err := mpiError(k.a.fn, rc); err != nil {
		k.r.release()
		return c.fail(req, -1, err, "")
	}
	rc, err := c.wait(ctx, k.r)
	if err != nil {
		k.r.abandon()
		return c.fail(req, -1, err, "waiting in "+k.a.fn)
	}
	k.r.complete(rc == C.MPI_SUCCESS)
	if err := mpiError(k.a.fn, rc); err != nil {
		return c.fail(req, -1, err, "")
	}
	return c.finishAvg(req, &k)
}

// startColl starts k's nonblocking MPI call unless the world has failed
// (see startChecked). Run it where MPI may be called.
func (c *Comm) startColl(k *call) (C.int, error) {
	if err := c.checkStart(); err != nil {
		return 0, err
	}
	return c.gcColl(k, false), nil
}

// gcColl is the one cgo call of a collective: the blocking MPI function,
// or the start of the nonblocking one into k.r.
//
// The buffers go to C as integers, so that cgo does not check them on
// every call (cgocheck's walk of the pointed-to memory is a measurable
// part of a small all-reduce; BenchmarkOverhead shows it). They hold no Go
// pointers (bytes of numbers), a blocking call's stay alive and in place
// until it returns (KeepAlive below; the goroutine's stack does not move
// while it is in C), and a nonblocking call's are C memory or pinned
// (request).
func (c *Comm) gcColl(k *call, blocking bool) C.int {
	var q *C.gc_req
	if k.r != nil {
		q = k.r.c
	}
	a := &k.a
	rc := C.gc_coll(a.kind, flag(blocking), C.uintptr_t(uintptr(a.s)), C.uintptr_t(uintptr(a.r)),
		a.n, a.sn, a.dt, a.op, a.root, a.inplace, a.size, c.comm, q)
	runtime.KeepAlive(a.s)
	runtime.KeepAlive(a.r)
	return rc
}

// finishAvg divides the result of an Avg by the communicator's size.
func (c *Comm) finishAvg(req *backend.Request, k *call) error {
	if k.avg != nil {
		if err := kernel.Divide(req.DType, k.avg, c.size); err != nil {
			return c.fail(req, -1, err, "")
		}
	}
	return nil
}

// fail turns the failure of a collective into an *core.OpError and
// aborts the world with it.
func (c *Comm) fail(req *backend.Request, peer int, err error, doing string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w %s (%v, %d elements of %v): a peer is slow, stuck, or not calling this collective",
			err, doing, req.Kind, req.SigCount, req.DType)
	}
	opErr := c.opErr(req, peer, err)
	c.w.abort(opErr) // does nothing if the world failed already
	return opErr
}

// prepare checks req and turns it into k: for a blocking call the Go
// buffers as they are, else staged or pinned ones in a request. Nothing
// is started yet.
func (c *Comm) prepare(k *call, req *backend.Request, blocking bool) error {
	dt, es := dtypeCode(req.DType), req.DType.Size()
	if es == 0 {
		return fmt.Errorf("comm: mpi backend: unknown element type %v", req.DType)
	}
	reduces := req.Kind == core.KindAllReduce || req.Kind == core.KindReduce ||
		req.Kind == core.KindReduceScatter || req.Kind == core.KindReduceScatterV
	if reduces && !req.Op.ValidFor(req.DType) {
		return fmt.Errorf("comm: mpi backend: %v cannot reduce %v", req.Op, req.DType)
	}
	if needsCounts(req.Kind) && len(req.Counts) != c.size {
		return fmt.Errorf("comm: mpi backend: %v needs %d counts, got %d", req.Kind, c.size, len(req.Counts))
	}
	if (req.Kind == core.KindAllToAll || req.Kind == core.KindAllToAllV) && len(req.RecvCounts) != c.size {
		return fmt.Errorf("comm: mpi backend: %v needs %d receive counts, got %d", req.Kind, c.size, len(req.RecvCounts))
	}
	if err := c.checkLengths(req, es); err != nil {
		return err
	}
	if !isCollective(req.Kind) {
		return fmt.Errorf("%w %v", errNoOperation, req.Kind)
	}
	*k = call{
		c: c, req: req, blocking: blocking, es: es, isRoot: c.rank == req.Root,
		a: cargs{dt: dt, op: opCode(req.Op), root: C.int(req.Root), size: C.int(c.size)},
	}
	if n := collIntsPerRank(req.Kind); n > 0 || !blocking {
		r, err := newRequest(n * c.size)
		if err != nil {
			return err
		}
		k.r = r
	}
	if err := k.build(); err != nil {
		k.release()
		return err
	}
	return nil
}

// release gives back k's request, if it has one, before or after a call
// that MPI has finished with.
func (k *call) release() {
	if k.r != nil {
		k.r.release()
		k.r = nil
	}
}

// errNoOperation is the error of a kind the backend does not run.
var errNoOperation = errors.New("comm: the mpi backend has no operation")

// isCollective reports whether the backend runs k with gc_coll.
func isCollective(k core.Kind) bool {
	switch k {
	case core.KindAllReduce, core.KindReduce, core.KindBroadcast, core.KindAllGather,
		core.KindAllGatherV, core.KindGather, core.KindGatherV, core.KindScatter,
		core.KindScatterV, core.KindReduceScatter, core.KindReduceScatterV,
		core.KindAllToAll, core.KindAllToAllV, core.KindBarrier:
		return true
	}
	return false
}

func needsCounts(k core.Kind) bool {
	switch k {
	case core.KindAllGather, core.KindAllGatherV, core.KindGather, core.KindGatherV,
		core.KindScatter, core.KindScatterV, core.KindReduceScatter, core.KindReduceScatterV,
		core.KindAllToAll, core.KindAllToAllV:
		return true
	}
	return false
}

// checkLengths refuses buffers shorter than req's counts say, so that MPI
// never reads or writes past a Go slice. (The comm package has checked
// them already; this guards direct users of the backend.)
func (c *Comm) checkLengths(req *backend.Request, es int) error {
	total := func(xs []int) int {
		n := 0
		for _, x := range xs {
			if x < 0 {
				return -1 << 62
			}
			n += x
		}
		return n
	}
	need := func(what string, b []byte, n int) error {
		if n < 0 || len(b) < n*es {
			return fmt.Errorf("comm: mpi backend: %v: %s has %d bytes, needs %d elements of %d bytes", req.Kind, what, len(b), n, es)
		}
		return nil
	}
	root := c.rank == req.Root
	if (req.Kind == core.KindReduce || req.Kind == core.KindBroadcast || req.Kind == core.KindGather ||
		req.Kind == core.KindGatherV || req.Kind == core.KindScatter || req.Kind == core.KindScatterV) &&
		(req.Root < 0 || req.Root >= c.size) {
		return fmt.Errorf("comm: mpi backend: %v: root %d out of range [0,%d)", req.Kind, req.Root, c.size)
	}
	var err error
	switch req.Kind {
	case core.KindAllReduce:
		err = need("send", req.Send, len(req.Recv)/es)
	case core.KindReduce:
		if root {
			err = need("recv", req.Recv, len(req.Send)/es)
		}
	case core.KindAllGather, core.KindAllGatherV:
		err = errors.Join(need("send", req.Send, req.Counts[c.rank]), need("recv", req.Recv, total(req.Counts)))
	case core.KindGather, core.KindGatherV:
		err = need("send", req.Send, req.Counts[c.rank])
		if root {
			err = errors.Join(err, need("recv", req.Recv, total(req.Counts)))
		}
	case core.KindScatter, core.KindScatterV:
		err = need("recv", req.Recv, req.Counts[c.rank])
		if root {
			err = errors.Join(err, need("send", req.Send, total(req.Counts)))
		}
	case core.KindReduceScatter, core.KindReduceScatterV:
		err = errors.Join(need("send", req.Send, total(req.Counts)), need("recv", req.Recv, req.Counts[c.rank]))
	case core.KindAllToAll, core.KindAllToAllV:
		err = errors.Join(need("send", req.Send, total(req.Counts)), need("recv", req.Recv, total(req.RecvCounts)))
	}
	return err
}

// startChecked looks for abort notices (at most every startAbortPoll),
// then runs start unless the world has failed, so that operations started
// after another rank's Abort fail even if MPI could still complete them.
// Run it where MPI may be called.
func (c *Comm) startChecked(start func() C.int) (C.int, error) {
	if err := c.checkStart(); err != nil {
		return 0, err
	}
	return start(), nil
}

// checkStart looks for abort notices (at most every startAbortPoll) and
// returns the world's failure, if it failed. Run it where MPI may be
// called.
func (c *Comm) checkStart() error { return c.checkStartAt(clock.Nanos()) }

// checkStartAt is checkStart at time now (clock.Nanos).
func (c *Comm) checkStartAt(now int64) error {
	w := c.w
	if last := w.lastAbortPoll.Load(); now-last >= int64(startAbortPoll) && w.lastAbortPoll.CompareAndSwap(last, now) {
		w.pollAbort()
	}
	return w.failure()
}

// startAbortPoll is how often, at most, starting operations look for abort
// notices (waiting operations look every abortPollEvery tests).
const startAbortPoll = 100 * time.Microsecond

func sameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

// p2pArgs checks a send's or receive's peer and tag and returns MPI's.
func (c *Comm) p2pArgs(req *backend.Request, buf []byte) (peer, tag, n C.int, err error) {
	es := req.DType.Size()
	if es == 0 {
		return 0, 0, 0, fmt.Errorf("comm: mpi backend: unknown element type %v", req.DType)
	}
	if req.Peer < -1 || req.Peer >= c.size || req.Peer == c.rank || (req.Peer == -1 && req.Kind == core.KindSend) {
		return 0, 0, 0, fmt.Errorf("%w: %v peer %d (this is rank %d of %d)", core.ErrBadPeer, req.Kind, req.Peer, c.rank, c.size)
	}
	if req.Tag < 0 || req.Tag > c.w.p.tagUB {
		return 0, 0, 0, fmt.Errorf("comm: mpi backend: tag %d is outside [0, %d] (MPI_TAG_UB)", req.Tag, c.w.p.tagUB)
	}
	n, err = cint("count", len(buf)/es)
	return C.int(req.Peer), C.int(req.Tag), n, err
}

// send is MPI_Isend, waited. If ctx ends first the send stays with MPI
// (which cannot reliably withdraw a send) and this rank's Send fails alone.
func (c *Comm) send(ctx context.Context, req *backend.Request) error {
	peer, tag, n, err := c.p2pArgs(req, req.Send)
	if err != nil {
		return c.opErr(req, req.Peer, err)
	}
	r, err := newRequest(0)
	if err != nil {
		return c.opErr(req, req.Peer, err)
	}
	b := r.in(req.Send)
	dt := dtypeCode(req.DType)
	var rc C.int
	var failed error
	c.do(func() {
		rc, failed = c.startChecked(func() C.int { return C.gc_isend(b, n, dt, peer, tag, c.comm, r.c) })
	})
	if failed != nil {
		r.release()
		return c.opErr(req, req.Peer, failed)
	}
	if err := mpiError("MPI_Isend", rc); err != nil {
		r.release()
		return c.opErr(req, req.Peer, err)
	}
	rc, err = c.wait(ctx, r)
	if err != nil {
		r.abandon()
		return c.opErr(req, req.Peer, err)
	}
	r.release()
	if err := mpiError("MPI_Isend", rc); err != nil {
		return c.opErr(req, req.Peer, err)
	}
	return nil
}

// recv is MPI_Irecv, waited; a receive whose ctx ends is cancelled.
func (c *Comm) recv(ctx context.Context, req *backend.Request) error {
	peer, tag, n, err := c.p2pArgs(req, req.Recv)
	if err != nil {
		return c.opErr(req, req.Peer, err)
	}
	r, err := newRequest(0)
	if err != nil {
		return c.opErr(req, req.Peer, err)
	}
	b := r.out(req.Recv)
	dt := dtypeCode(req.DType)
	var rc C.int
	var failed error
	c.do(func() {
		rc, failed = c.startChecked(func() C.int { return C.gc_irecv(b, n, dt, peer, tag, c.comm, r.c) })
	})
	if failed != nil {
		r.release()
		return c.opErr(req, req.Peer, failed)
	}
	if err := mpiError("MPI_Irecv", rc); err != nil {
		r.release()
		return c.opErr(req, req.Peer, err)
	}
	rc, err = c.wait(ctx, r)
	if err != nil {
		cancelled, crc, confirmed := c.cancelRecv(r)
		if !confirmed {
			return c.opErr(req, req.Peer, err)
		}
		if cancelled {
			r.release()
			return c.opErr(req, req.Peer, err)
		}
		rc = crc // it arrived after all
	}
	var source, got C.int
	c.do(func() { source, got = C.gc_source(r.c), C.gc_bytes(r.c) })
	r.complete(rc == C.MPI_SUCCESS)
	if err := mpiError("MPI_Irecv", rc); err != nil {
		if isTruncate(err) {
			err = fmt.Errorf("%w: the message from rank %d is longer than the %d-byte buffer: %w", core.ErrLength, source, len(req.Recv), err)
		}
		return c.opErr(req, req.Peer, err)
	}
	req.Source = int(source)
	if int(got) != len(req.Recv) {
		return c.opErr(req, int(source), fmt.Errorf("%w: rank %d sent %d bytes, the buffer has %d", core.ErrLength, source, got, len(req.Recv)))
	}
	return nil
}

// monitoredBarrier: every rank sends an empty message to rank 0 on the
// monitored-barrier communicator, with a tag made from the sequence
// number; rank 0 receives them until req.Timeout, cancels the receives of
// ranks that did not arrive, and answers every rank with one byte per rank
// (1 = late). A late rank finds its answer waiting when it arrives. As in
// the native backend nothing is aborted.
func (c *Comm) monitoredBarrier(ctx context.Context, req *backend.Request) error {
	// Its own communicator and tags: no ordering with other collectives.
	if err := c.waitTurn(ctx, req.Seq); err != nil {
		return c.fail(req, -1, err, "waiting for its turn to start")
	}
	c.advance(req.Seq)
	half := uint64(c.w.p.tagUB/2) + 1
	arrive := C.int(2 * (req.Seq % half))
	answer := arrive + 1
	report := func(status []byte) error {
		var late []int
		for r, s := range status {
			if s != 0 {
				late = append(late, r)
			}
		}
		if len(late) == 0 {
			return nil
		}
		return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: late[0], Seq: req.Seq,
			Err: &core.BarrierError{Late: late, Timeout: req.Timeout}}
	}
	byteType := dtypeCode(core.Byte)
	// post starts a send (send=true) or receive of b with peer and tag.
	post := func(send bool, b []byte, peer int, tag C.int) (*request, error) {
		r, err := newRequest(0)
		if err != nil {
			return nil, err
		}
		var p unsafe.Pointer
		if send {
			p = r.in(b)
		} else {
			p = r.out(b)
		}
		var rc C.int
		c.do(func() {
			if send {
				rc = C.gc_isend(p, C.int(len(b)), byteType, C.int(peer), tag, c.mbComm, r.c)
			} else {
				rc = C.gc_irecv(p, C.int(len(b)), byteType, C.int(peer), tag, c.mbComm, r.c)
			}
		})
		if err := mpiError("MPI_Isend/MPI_Irecv", rc); err != nil {
			r.release()
			return nil, err
		}
		return r, nil
	}
	// finish waits for r and returns MPI's verdict, abandoning r if the
	// wait stops early.
	finish := func(r *request, peer int) error {
		rc, err := c.wait(ctx, r)
		if err != nil {
			r.abandon()
			return c.opErr(req, peer, err)
		}
		r.complete(rc == C.MPI_SUCCESS)
		if err := mpiError("MPI_Wait", rc); err != nil {
			return c.opErr(req, peer, err)
		}
		return nil
	}
	status := make([]byte, c.size)
	if c.rank != 0 {
		in, err := post(false, status, 0, answer)
		if err != nil {
			return c.opErr(req, 0, err)
		}
		out, err := post(true, nil, 0, arrive)
		if err != nil {
			cancelled, _, confirmed := c.cancelRecv(in)
			if cancelled && confirmed {
				in.release()
			}
			return c.opErr(req, 0, err)
		}
		if err := finish(out, 0); err != nil {
			return err
		}
		if err := finish(in, 0); err != nil {
			return err
		}
		return report(status)
	}
	recvs := make([]*request, c.size)
	for r := 1; r < c.size; r++ {
		x, err := post(false, nil, r, arrive)
		if err != nil {
			for q := 1; q < r; q++ {
				if cancelled, _, confirmed := c.cancelRecv(recvs[q]); cancelled && confirmed {
					recvs[q].release()
				}
			}
			return c.opErr(req, r, err)
		}
		recvs[r] = x
	}
	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	var stop error
	for r := 1; r < c.size && stop == nil; r++ {
		var rc C.int
		rc, stop = c.waitUntil(ctx, recvs[r], timer.C)
		if stop == nil {
			recvs[r].release()
			recvs[r] = nil
			if err := mpiError("MPI_Irecv", rc); err != nil {
				stop = err
			}
		}
	}
	// Whoever has not arrived by now is late (or the wait failed).
	for r := 1; r < c.size; r++ {
		if recvs[r] == nil {
			continue
		}
		cancelled, _, confirmed := c.cancelRecv(recvs[r])
		switch {
		case !confirmed:
			status[r] = 1
		case cancelled:
			recvs[r].release()
			status[r] = 1
		default:
			recvs[r].release() // it came in at the last moment
		}
	}
	if stop != nil && stop != errDeadline {
		return c.opErr(req, -1, stop)
	}
	if !req.WaitAll {
		// Like torch: report the first late rank only.
		first := true
		for r := range status {
			if status[r] != 0 && !first {
				status[r] = 0
			}
			if status[r] != 0 {
				first = false
			}
		}
	}
	var errs []error
	for r := 1; r < c.size; r++ {
		x, err := post(true, status, r, answer)
		if err == nil {
			err = finish(x, r)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return report(status)
}
