// The C side of the mpi backend: thin wrappers over MPI that take the
// backend's dtype and op numbers, the float16/bfloat16 and Go-semantics
// float reductions as user-defined MPI ops, and the initialisation that
// keeps Go's signal handlers. Included by every cgo file of the package;
// compiled only with -tags mpi (see mpi_shim.c).
#ifndef GOCOMM_MPI_SHIM_H
#define GOCOMM_MPI_SHIM_H

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

// Element types, numbered as backend.DType (checked by a test).
enum {
	gcInt8 = 1, gcInt16, gcInt32, gcInt64, gcUint8, gcUint16, gcUint32, gcUint64,
	gcFloat16, gcBFloat16, gcFloat32, gcFloat64, gcByte
};

// Reduce operators, numbered as backend.Op.
enum { gcSum = 0, gcProd, gcMin, gcMax, gcBAnd, gcBOr, gcBXor, gcAvg };

// Collectives of gc_coll.
enum {
	gcCollAllReduce = 1, gcCollReduce, gcCollBroadcast, gcCollAllGather, gcCollAllGatherV, gcCollGather,
	gcCollGatherV, gcCollScatter, gcCollScatterV, gcCollReduceScatter, gcCollReduceScatterV, gcCollAllToAll,
	gcCollAllToAllV, gcCollBarrier
};

// gc_req is one nonblocking MPI operation: its request, its status, the
// count and displacement arrays MPI reads until it completes, and an arena
// that small buffers are staged in (8-byte aligned).
typedef struct {
	MPI_Request req;
	MPI_Status st;
	int *ints;
	char *arena;
	int arena_len;
} gc_req;

MPI_Datatype gc_type(int dt);
int gc_reduce_local(int dt, int op, void *in, void *inout, int n);
int gc_init(int want, int *provided, int *already);
int gc_tag_ub(void);
void gc_world_rank_size(int *rank, int *size);
int gc_world_open(MPI_Comm *comm, MPI_Comm *mb, MPI_Comm *ab);
int gc_group_open(MPI_Comm parent, int *members, int n, int tag, MPI_Comm *comm, MPI_Comm *mb);
void gc_rank_size(MPI_Comm c, int *rank, int *size);
void gc_free(MPI_Comm *c);
int gc_local(MPI_Comm c, int *rank, int *size);
void gc_error_string(int code, char *buf, int *class);
gc_req *gc_req_new(int nints, int arena);
void gc_req_reset(gc_req *q);
int gc_coll(int kind, int blocking, uintptr_t s, uintptr_t r, int n, int sn, int dt, int op, int root, int inplace,
            int size, MPI_Comm c, gc_req *q);
int gc_ibcast(void *b, int n, int dt, int root, MPI_Comm c, gc_req *q);
int gc_isend(void *b, int n, int dt, int peer, int tag, MPI_Comm c, gc_req *q);
int gc_irecv(void *b, int n, int dt, int peer, int tag, MPI_Comm c, gc_req *q);
int gc_improbe(int peer, int tag, MPI_Comm c, int *found, MPI_Message *msg, int *source, int *bytes);
int gc_imrecv(void *b, int n, int dt, MPI_Message *msg, gc_req *q);
int gc_test(gc_req *q);
int gc_cancel(gc_req *q);
int gc_source(gc_req *q);
int gc_bytes(gc_req *q);
int gc_cancelled(gc_req *q);
void gc_yield(void);
void gc_abort(int code);
int gc_bench_iallreduce(MPI_Comm c, int iters);
int gc_bench_allreduce(MPI_Comm c, int iters);

#endif
