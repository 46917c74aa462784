//go:build mpi && cgo

package mpi

/*
#include <mpi.h>
#include <stdlib.h>

// gc_host_leaders sets leaders[r], for every rank r of c, to the lowest
// rank of c on r's host (MPI_COMM_TYPE_SHARED). Collective over c.
static int gc_host_leaders(MPI_Comm c, int *leaders) {
	MPI_Comm local;
	int me, leader, rc;
	rc = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_rank(c, &me);
	rc = MPI_Allreduce(&me, &leader, 1, MPI_INT, MPI_MIN, local);
	MPI_Comm_free(&local);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, c);
}
*/
import "C"

import (
	"unsafe"

	"github.com/gocomm/comm/backend"
)

var _ backend.HostLayout = (*Comm)(nil)

// learnHosts records which world ranks share a host, as MPI sees it
// (MPI_COMM_TYPE_SHARED), from the world communicator comm. Every rank
// calls it while opening the world.
func (w *world) learnHosts(comm C.MPI_Comm) error {
	leaders := (*C.int)(C.malloc(C.size_t(w.size) * C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(leaders))
	var rc C.int
	w.do(func() { rc = C.gc_host_leaders(comm, leaders) })
	if err := mpiError("MPI_Comm_split_type/MPI_Allgather (hosts)", rc); err != nil {
		return err
	}
	w.hostLeader = make([]int, w.size)
	for r, l := range unsafe.Slice(leaders, w.size) {
		w.hostLeader[r] = int(l)
	}
	return nil
}

// Hosts returns the host index of every rank of c, hosts numbered in
// order of their lowest rank of c, as MPI_COMM_TYPE_SHARED groups the
// world's ranks when it opened.
func (c *Comm) Hosts() []int {
	if len(c.worldRanks) != c.size || c.w.hostLeader == nil {
		return nil
	}
	return backend.NumberHosts(c.size, func(r int) int { return c.w.hostLeader[c.worldRanks[r]] })
}
