//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// collIntsPerRank is the number of C ints a collective's count and
// displacement arrays need per rank of the communicator (0: none).
func collIntsPerRank(k core.Kind) int {
	switch k {
	case core.KindAllGatherV, core.KindGatherV, core.KindScatterV:
		return 2
	case core.KindReduceScatterV:
		return 1
	case core.KindAllToAllV:
		return 4
	}
	return 0
}

// cargs is one collective in MPI's terms: the arguments of gc_coll (C
// ints, and the buffer addresses: staged, pinned, or for a blocking call
// the Go buffers themselves).
type cargs struct {
	kind                               C.int // gcColl*
	s, r                               unsafe.Pointer
	n, sn, dt, op, root, inplace, size C.int
	fn                                 string // the MPI function, for errors
	blockingFn                         string // the blocking one
}

// call is one collective being turned into cargs: req's arguments in
// MPI's terms. Built and used on one goroutine, on its stack.
type call struct {
	c        *Comm
	req      *backend.Request
	r        *request // the count arrays, and for nonblocking calls the staged or pinned buffers; nil for a blocking call without arrays
	blocking bool     // the buffers are passed to MPI as they are, for the duration of one call
	a        cargs
	avg      []byte // the buffer to divide by the size after an Avg
	es       int
	isRoot   bool
}

func flag(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// block is this rank's block of a full buffer at element offset off, or
// nil if full has no such block.
func (k *call) block(full []byte, off, n int) []byte {
	if n == 0 || len(full) < (off+n)*k.es {
		return nil
	}
	return full[off*k.es : (off+n)*k.es]
}

// arrays writes counts and their displacements at r.ints[at:].
func (k *call) arrays(at int, counts []int) error {
	off := 0
	for i, n := range counts {
		if _, err := cint("count", n); err != nil {
			return err
		}
		if _, err := cint("displacement", off); err != nil {
			return err
		}
		k.r.ints[at+i] = C.int(n)
		k.r.ints[at+len(counts)+i] = C.int(off)
		off += n
	}
	_, err := cint("total count", off)
	return err
}

// evenCount is the per-rank count n of an even collective, checked with
// its total over the communicator.
func (k *call) evenCount(n int) (C.int, error) {
	cn, err := cint("count", n)
	if err != nil {
		return 0, err
	}
	if _, err := cint("total count", k.c.size*n); err != nil {
		return 0, err
	}
	return cn, nil
}

// avgOn makes the call divide buf by the size after an Avg.
func (k *call) avgOn(buf []byte) {
	if k.req.Op == core.Avg {
		k.avg = buf
	}
}

// buf is the address MPI uses for b: b itself for a blocking call (Go
// memory without Go pointers, passed for the duration of the call), else
// a staged copy or b pinned (request.in and request.out). nil for an
// empty buffer.
func (k *call) buf(b []byte, out bool) unsafe.Pointer {
	if k.blocking {
		if len(b) == 0 {
			return nil
		}
		return unsafe.Pointer(unsafe.SliceData(b))
	}
	if out {
		return k.r.out(b)
	}
	return k.r.in(b)
}

// inUnless is the send buffer unless the call is in place (nil).
func (k *call) inUnless(inPlace bool, b []byte) unsafe.Pointer {
	if inPlace {
		return nil
	}
	return k.buf(b, false)
}

// outIf is the receive buffer where cond holds (else nil).
func (k *call) outIf(cond bool, b []byte) unsafe.Pointer {
	if !cond {
		return nil
	}
	return k.buf(b, true)
}

// set records the call's kind and MPI function names.
func (k *call) set(kind C.int, blocking, nonblocking string) {
	k.a.kind, k.a.blockingFn, k.a.fn = kind, blocking, nonblocking
}

// build fills k.a for k.req's kind.
func (k *call) build() error {
	switch k.req.Kind {
	case core.KindAllReduce:
		return k.allReduce()
	case core.KindReduce:
		return k.reduce()
	case core.KindBroadcast:
		return k.broadcast()
	case core.KindAllGather:
		return k.allGather()
	case core.KindAllGatherV:
		return k.allGatherV()
	case core.KindGather:
		return k.gather()
	case core.KindGatherV:
		return k.gatherV()
	case core.KindScatter:
		return k.scatter()
	case core.KindScatterV:
		return k.scatterV()
	case core.KindReduceScatter:
		return k.reduceScatter()
	case core.KindReduceScatterV:
		return k.reduceScatterV()
	case core.KindAllToAll:
		return k.allToAll()
	case core.KindAllToAllV:
		return k.allToAllV()
	case core.KindBarrier:
		k.set(C.gcCollBarrier, "MPI_Barrier", "MPI_Ibarrier")
		return nil
	}
	return fmt.Errorf("%w %v", errNoOperation, k.req.Kind)
}

func (k *call) allReduce() error {
	req := k.req
	n, err := cint("count", len(req.Recv)/k.es)
	if err != nil {
		return err
	}
	in := sameStart(req.Send, req.Recv)
	k.a.s, k.a.r = k.inUnless(in, req.Send), k.buf(req.Recv, true)
	k.a.n, k.a.inplace = n, flag(in)
	k.set(C.gcCollAllReduce, "MPI_Allreduce", "MPI_Iallreduce")
	k.avgOn(req.Recv)
	return nil
}

func (k *call) reduce() error {
	req := k.req
	n, err := cint("count", len(req.Send)/k.es)
	if err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Send, req.Recv)
	k.a.s, k.a.r = k.inUnless(in, req.Send), k.outIf(k.isRoot, req.Recv)
	k.a.n, k.a.inplace = n, flag(in)
	k.set(C.gcCollReduce, "MPI_Reduce", "MPI_Ireduce")
	if k.isRoot {
		k.avgOn(req.Recv)
	}
	return nil
}

func (k *call) broadcast() error {
	n, err := cint("count", len(k.req.Recv)/k.es)
	if err != nil {
		return err
	}
	k.a.r, k.a.n = k.buf(k.req.Recv, true), n
	k.set(C.gcCollBroadcast, "MPI_Bcast", "MPI_Ibcast")
	return nil
}

func (k *call) allGather() error {
	req, mine := k.req, k.req.Counts[k.c.rank]
	n, err := k.evenCount(mine)
	if err != nil {
		return err
	}
	in := sameStart(req.Send, k.block(req.Recv, k.c.rank*mine, mine))
	k.a.s, k.a.r = k.inUnless(in, req.Send), k.buf(req.Recv, true)
	k.a.n, k.a.inplace = n, flag(in)
	k.set(C.gcCollAllGather, "MPI_Allgather", "MPI_Iallgather")
	return nil
}

func (k *call) allGatherV() error {
	req, r := k.req, k.r
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	in := sameStart(req.Send, k.block(req.Recv, int(r.ints[k.c.size+k.c.rank]), req.Counts[k.c.rank]))
	k.a.s, k.a.r = k.inUnless(in, req.Send), k.buf(req.Recv, true)
	k.a.sn, k.a.inplace = C.int(req.Counts[k.c.rank]), flag(in)
	k.set(C.gcCollAllGatherV, "MPI_Allgatherv", "MPI_Iallgatherv")
	return nil
}

func (k *call) gather() error {
	req, mine := k.req, k.req.Counts[k.c.rank]
	n, err := k.evenCount(mine)
	if err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Send, k.block(req.Recv, k.c.rank*mine, mine))
	k.a.s, k.a.r = k.inUnless(in, req.Send), k.outIf(k.isRoot, req.Recv)
	k.a.n, k.a.inplace = n, flag(in)
	k.set(C.gcCollGather, "MPI_Gather", "MPI_Igather")
	return nil
}

func (k *call) gatherV() error {
	req, r := k.req, k.r
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Send, k.block(req.Recv, int(r.ints[k.c.size+k.c.rank]), req.Counts[k.c.rank]))
	k.a.s, k.a.r = k.inUnless(in, req.Send), k.outIf(k.isRoot, req.Recv)
	k.a.sn, k.a.inplace = C.int(req.Counts[k.c.rank]), flag(in)
	k.set(C.gcCollGatherV, "MPI_Gatherv", "MPI_Igatherv")
	return nil
}

func (k *call) scatter() error {
	req, mine := k.req, k.req.Counts[k.c.rank]
	n, err := k.evenCount(mine)
	if err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Recv, k.block(req.Send, k.c.rank*mine, mine))
	if k.isRoot {
		k.a.s = k.buf(req.Send, false)
	}
	k.a.r = k.outIf(!in, req.Recv)
	k.a.n, k.a.inplace = n, flag(in)
	k.set(C.gcCollScatter, "MPI_Scatter", "MPI_Iscatter")
	return nil
}

func (k *call) scatterV() error {
	req, r := k.req, k.r
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Recv, k.block(req.Send, int(r.ints[k.c.size+k.c.rank]), req.Counts[k.c.rank]))
	if k.isRoot {
		k.a.s = k.buf(req.Send, false)
	}
	k.a.r = k.outIf(!in, req.Recv)
	k.a.sn, k.a.inplace = C.int(req.Counts[k.c.rank]), flag(in)
	k.set(C.gcCollScatterV, "MPI_Scatterv", "MPI_Iscatterv")
	return nil
}

func (k *call) reduceScatter() error {
	req := k.req
	n, err := k.evenCount(req.Counts[k.c.rank])
	if err != nil {
		return err
	}
	k.a.s, k.a.r, k.a.n = k.buf(req.Send, false), k.buf(req.Recv, true), n
	k.set(C.gcCollReduceScatter, "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block")
	k.avgOn(req.Recv)
	return nil
}

func (k *call) reduceScatterV() error {
	req, r := k.req, k.r
	off := 0
	for i, n := range req.Counts {
		if _, err := cint("count", n); err != nil {
			return err
		}
		r.ints[i] = C.int(n)
		off += n
	}
	if _, err := cint("total count", off); err != nil {
		return err
	}
	k.a.s, k.a.r = k.buf(req.Send, false), k.buf(req.Recv, true)
	k.set(C.gcCollReduceScatterV, "MPI_Reduce_scatter", "MPI_Ireduce_scatter")
	k.avgOn(req.Recv)
	return nil
}

func (k *call) allToAll() error {
	req := k.req
	n, err := k.evenCount(req.Counts[0])
	if err != nil {
		return err
	}
	k.a.s, k.a.r, k.a.n = k.buf(req.Send, false), k.buf(req.Recv, true), n
	k.set(C.gcCollAllToAll, "MPI_Alltoall", "MPI_Ialltoall")
	return nil
}

func (k *call) allToAllV() error {
	req := k.req
	// ints: sendcounts, sdispls, recvcounts, rdispls.
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	if err := k.arrays(2*k.c.size, req.RecvCounts); err != nil {
		return err
	}
	k.a.s, k.a.r = k.buf(req.Send, false), k.buf(req.Recv, true)
	k.set(C.gcCollAllToAllV, "MPI_Alltoallv", "MPI_Ialltoallv")
	return nil
}
