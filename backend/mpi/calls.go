//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"unsafe"

	"github.com/gocomm/comm/backend"
)

// callBuilder is how one collective kind becomes an MPI call.
type callBuilder struct {
	// ints is the number of C ints the call's count and displacement
	// arrays need, per rank of the communicator.
	ints int
	// build fills the call's pinned buffers, arrays and start function.
	build func(*call) error
}

// calls is the MPI call of every collective kind the backend runs.
var calls = map[backend.Kind]callBuilder{
	backend.KindAllReduce:      {build: (*call).allReduce},
	backend.KindReduce:         {build: (*call).reduce},
	backend.KindBroadcast:      {build: (*call).broadcast},
	backend.KindAllGather:      {build: (*call).allGather},
	backend.KindAllGatherV:     {ints: 2, build: (*call).allGatherV},
	backend.KindGather:         {build: (*call).gather},
	backend.KindGatherV:        {ints: 2, build: (*call).gatherV},
	backend.KindScatter:        {build: (*call).scatter},
	backend.KindScatterV:       {ints: 2, build: (*call).scatterV},
	backend.KindReduceScatter:  {build: (*call).reduceScatter},
	backend.KindReduceScatterV: {ints: 1, build: (*call).reduceScatterV},
	backend.KindAllToAll:       {build: (*call).allToAll},
	backend.KindAllToAllV:      {ints: 4, build: (*call).allToAllV},
	backend.KindBarrier:        {build: (*call).barrier},
}

// call is one collective being built into st: req's arguments in MPI's
// terms. Built and used on one goroutine.
type call struct {
	c      *Comm
	st     *started
	req    *backend.Request
	r      *request
	comm   C.MPI_Comm
	dt, op C.int
	es     int
	size   C.int
	root   C.int
	isRoot bool
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
	if k.req.Op == backend.Avg {
		k.st.avg = buf
	}
}

// in pins b as the send buffer unless the call is in place (nil).
func (k *call) inUnless(inPlace bool, b []byte) unsafe.Pointer {
	if inPlace {
		return nil
	}
	return k.r.in(b)
}

// outIf pins b as the receive buffer where cond holds (else nil).
func (k *call) outIf(cond bool, b []byte) unsafe.Pointer {
	if !cond {
		return nil
	}
	return k.r.out(b)
}

func (k *call) allReduce() error {
	req, r := k.req, k.r
	n, err := cint("count", len(req.Recv)/k.es)
	if err != nil {
		return err
	}
	in := sameStart(req.Send, req.Recv)
	s, rb := k.inUnless(in, req.Send), r.out(req.Recv)
	dt, op, comm := k.dt, k.op, k.comm
	k.st.fn = "MPI_Iallreduce"
	k.st.start = func() C.int { return C.gc_iallreduce(s, rb, n, dt, op, flag(in), comm, r.c) }
	k.avgOn(req.Recv)
	return nil
}

func (k *call) reduce() error {
	req, r := k.req, k.r
	n, err := cint("count", len(req.Send)/k.es)
	if err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Send, req.Recv)
	s, rb := k.inUnless(in, req.Send), k.outIf(k.isRoot, req.Recv)
	dt, op, root, comm := k.dt, k.op, k.root, k.comm
	k.st.fn = "MPI_Ireduce"
	k.st.start = func() C.int { return C.gc_ireduce(s, rb, n, dt, op, root, flag(in), comm, r.c) }
	if k.isRoot {
		k.avgOn(req.Recv)
	}
	return nil
}

func (k *call) broadcast() error {
	r := k.r
	n, err := cint("count", len(k.req.Recv)/k.es)
	if err != nil {
		return err
	}
	b := r.out(k.req.Recv)
	dt, root, comm := k.dt, k.root, k.comm
	k.st.fn = "MPI_Ibcast"
	k.st.start = func() C.int { return C.gc_ibcast(b, n, dt, root, comm, r.c) }
	return nil
}

func (k *call) allGather() error {
	req, r, mine := k.req, k.r, k.req.Counts[k.c.rank]
	n, err := k.evenCount(mine)
	if err != nil {
		return err
	}
	in := sameStart(req.Send, k.block(req.Recv, k.c.rank*mine, mine))
	s, rb := k.inUnless(in, req.Send), r.out(req.Recv)
	dt, comm := k.dt, k.comm
	k.st.fn = "MPI_Iallgather"
	k.st.start = func() C.int { return C.gc_iallgather(s, rb, n, dt, flag(in), comm, r.c) }
	return nil
}

func (k *call) allGatherV() error {
	req, r := k.req, k.r
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	sn := C.int(req.Counts[k.c.rank])
	in := sameStart(req.Send, k.block(req.Recv, int(r.ints[k.c.size+k.c.rank]), req.Counts[k.c.rank]))
	s, rb := k.inUnless(in, req.Send), r.out(req.Recv)
	dt, size, comm := k.dt, k.size, k.comm
	k.st.fn = "MPI_Iallgatherv"
	k.st.start = func() C.int { return C.gc_iallgatherv(s, sn, rb, dt, flag(in), size, comm, r.c) }
	return nil
}

func (k *call) gather() error {
	req, r, mine := k.req, k.r, k.req.Counts[k.c.rank]
	n, err := k.evenCount(mine)
	if err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Send, k.block(req.Recv, k.c.rank*mine, mine))
	s, rb := k.inUnless(in, req.Send), k.outIf(k.isRoot, req.Recv)
	dt, root, comm := k.dt, k.root, k.comm
	k.st.fn = "MPI_Igather"
	k.st.start = func() C.int { return C.gc_igather(s, rb, n, dt, root, flag(in), comm, r.c) }
	return nil
}

func (k *call) gatherV() error {
	req, r := k.req, k.r
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	sn := C.int(req.Counts[k.c.rank])
	in := k.isRoot && sameStart(req.Send, k.block(req.Recv, int(r.ints[k.c.size+k.c.rank]), req.Counts[k.c.rank]))
	s, rb := k.inUnless(in, req.Send), k.outIf(k.isRoot, req.Recv)
	dt, root, size, comm := k.dt, k.root, k.size, k.comm
	k.st.fn = "MPI_Igatherv"
	k.st.start = func() C.int { return C.gc_igatherv(s, sn, rb, dt, root, flag(in), size, comm, r.c) }
	return nil
}

func (k *call) scatter() error {
	req, r, mine := k.req, k.r, k.req.Counts[k.c.rank]
	n, err := k.evenCount(mine)
	if err != nil {
		return err
	}
	in := k.isRoot && sameStart(req.Recv, k.block(req.Send, k.c.rank*mine, mine))
	var s unsafe.Pointer
	if k.isRoot {
		s = r.in(req.Send)
	}
	rb := k.outIf(!in, req.Recv)
	dt, root, comm := k.dt, k.root, k.comm
	k.st.fn = "MPI_Iscatter"
	k.st.start = func() C.int { return C.gc_iscatter(s, rb, n, dt, root, flag(in), comm, r.c) }
	return nil
}

func (k *call) scatterV() error {
	req, r := k.req, k.r
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	rn := C.int(req.Counts[k.c.rank])
	in := k.isRoot && sameStart(req.Recv, k.block(req.Send, int(r.ints[k.c.size+k.c.rank]), req.Counts[k.c.rank]))
	var s unsafe.Pointer
	if k.isRoot {
		s = r.in(req.Send)
	}
	rb := k.outIf(!in, req.Recv)
	dt, root, size, comm := k.dt, k.root, k.size, k.comm
	k.st.fn = "MPI_Iscatterv"
	k.st.start = func() C.int { return C.gc_iscatterv(s, rb, rn, dt, root, flag(in), size, comm, r.c) }
	return nil
}

func (k *call) reduceScatter() error {
	req, r := k.req, k.r
	n, err := k.evenCount(req.Counts[k.c.rank])
	if err != nil {
		return err
	}
	s, rb := r.in(req.Send), r.out(req.Recv)
	dt, op, comm := k.dt, k.op, k.comm
	k.st.fn = "MPI_Ireduce_scatter_block"
	k.st.start = func() C.int { return C.gc_ireduce_scatter_block(s, rb, n, dt, op, comm, r.c) }
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
	s, rb := r.in(req.Send), r.out(req.Recv)
	dt, op, comm := k.dt, k.op, k.comm
	k.st.fn = "MPI_Ireduce_scatter"
	k.st.start = func() C.int { return C.gc_ireduce_scatter(s, rb, dt, op, comm, r.c) }
	k.avgOn(req.Recv)
	return nil
}

func (k *call) allToAll() error {
	req, r := k.req, k.r
	n, err := k.evenCount(req.Counts[0])
	if err != nil {
		return err
	}
	s, rb := r.in(req.Send), r.out(req.Recv)
	dt, comm := k.dt, k.comm
	k.st.fn = "MPI_Ialltoall"
	k.st.start = func() C.int { return C.gc_ialltoall(s, rb, n, dt, comm, r.c) }
	return nil
}

func (k *call) allToAllV() error {
	req, r := k.req, k.r
	// ints: sendcounts, sdispls, recvcounts, rdispls.
	if err := k.arrays(0, req.Counts); err != nil {
		return err
	}
	if err := k.arrays(2*k.c.size, req.RecvCounts); err != nil {
		return err
	}
	s, rb := r.in(req.Send), r.out(req.Recv)
	dt, size, comm := k.dt, k.size, k.comm
	k.st.fn = "MPI_Ialltoallv"
	k.st.start = func() C.int { return C.gc_ialltoallv(s, rb, dt, size, comm, r.c) }
	return nil
}

func (k *call) barrier() error {
	r, comm := k.r, k.comm
	k.st.fn = "MPI_Ibarrier"
	k.st.start = func() C.int { return C.gc_ibarrier(comm, r.c) }
	return nil
}
