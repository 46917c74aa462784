//go:build mpi && cgo

#include <math.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

#include "mpi_shim.h"

MPI_Datatype gc_type(int dt) {
	switch (dt) {
	case gcInt8: return MPI_INT8_T;
	case gcInt16: return MPI_INT16_T;
	case gcInt32: return MPI_INT32_T;
	case gcInt64: return MPI_INT64_T;
	case gcUint8: return MPI_UINT8_T;
	case gcUint16: return MPI_UINT16_T;
	case gcUint32: return MPI_UINT32_T;
	case gcUint64: return MPI_UINT64_T;
	case gcFloat16: return MPI_UINT16_T; // reduced by the user-defined ops below
	case gcBFloat16: return MPI_UINT16_T;
	case gcFloat32: return MPI_FLOAT;
	case gcFloat64: return MPI_DOUBLE;
	case gcByte: return MPI_BYTE;
	}
	return MPI_DATATYPE_NULL;
}

// ---- float16 and bfloat16, with the rounding of internal/kernel ----

// gc_f16_to_f32 widens a binary16 bit pattern exactly; NaNs keep their
// payload and are made quiet.
static inline float gc_f16_to_f32(uint16_t h) {
	uint32_t em = h & 0x7fffu, bits;
	float f;
	if (em >= 0x7c00u) {
		bits = 0x7f800000u | ((em & 0x03ffu) << 13);
		if (em != 0x7c00u) bits |= 0x00400000u;
	} else if (em >= 0x0400u) {
		bits = (em << 13) + ((127u - 15u) << 23);
	} else {
		f = (float)em * 0x1p-24f; // subnormal or zero: exact
		memcpy(&bits, &f, 4);
	}
	bits |= (uint32_t)(h & 0x8000u) << 16;
	memcpy(&f, &bits, 4);
	return f;
}

// gc_f32_to_f16 rounds to the nearest binary16, ties to even. Magnitudes
// from 65520 up become infinity; a NaN becomes a quiet NaN keeping the top
// of its payload.
static inline uint16_t gc_f32_to_f16(float f) {
	uint32_t b, a, sign, e, m, q, rem, half;
	int shift;
	memcpy(&b, &f, 4);
	sign = (b >> 16) & 0x8000u;
	a = b & 0x7fffffffu;
	if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x01ffu));
	if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
	if (a >= 0x38800000u) { // normal result: rebias, round the 13 dropped bits
		a -= (127u - 15u) << 23;
		return (uint16_t)(sign | ((a + 0x0fffu + ((a >> 13) & 1u)) >> 13));
	}
	// Subnormal result: count steps of 2^-24, rounding to even.
	e = a >> 23;
	if (e < 102) return (uint16_t)sign; // below 2^-25: rounds to zero
	m = (a & 0x007fffffu) | 0x00800000u;
	shift = 126 - (int)e; // 14..24
	q = m >> shift;
	rem = m & ((1u << shift) - 1u);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1u))) q++;
	return (uint16_t)(sign | q);
}

static inline float gc_bf16_to_f32(uint16_t h) {
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline uint16_t gc_f32_to_bf16(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x0040u);
	return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// Go's min and max: a NaN operand gives NaN, and -0 is below +0.
#define GC_GO_MINMAX(T, minname, maxname) \
static inline T minname(T x, T y) { \
	if (x != x) return x; \
	if (y != y) return y; \
	if (x < y) return x; \
	if (y < x) return y; \
	return signbit(x) ? x : y; \
} \
static inline T maxname(T x, T y) { \
	if (x != x) return x; \
	if (y != y) return y; \
	if (x > y) return x; \
	if (y > x) return y; \
	return signbit(x) ? y : x; \
}
GC_GO_MINMAX(float, gc_minf, gc_maxf)
GC_GO_MINMAX(double, gc_mind, gc_maxd)

// User-defined MPI ops: inout[i] = inout[i] op in[i], like kernel.Reduce's
// dst = op(dst, src).
#define GC_HALF_OP(name, widen, narrow, expr) \
static void name(void *in, void *inout, int *len, MPI_Datatype *dt) { \
	const uint16_t *s = (const uint16_t *)in; \
	uint16_t *d = (uint16_t *)inout; \
	int i, n = *len; \
	(void)dt; \
	for (i = 0; i < n; i++) { \
		float x = widen(d[i]), y = widen(s[i]); \
		d[i] = narrow(expr); \
	} \
}
GC_HALF_OP(gc_f16_sum, gc_f16_to_f32, gc_f32_to_f16, x + y)
GC_HALF_OP(gc_f16_prod, gc_f16_to_f32, gc_f32_to_f16, x * y)
GC_HALF_OP(gc_f16_min, gc_f16_to_f32, gc_f32_to_f16, gc_minf(x, y))
GC_HALF_OP(gc_f16_max, gc_f16_to_f32, gc_f32_to_f16, gc_maxf(x, y))
GC_HALF_OP(gc_bf16_sum, gc_bf16_to_f32, gc_f32_to_bf16, x + y)
GC_HALF_OP(gc_bf16_prod, gc_bf16_to_f32, gc_f32_to_bf16, x * y)
GC_HALF_OP(gc_bf16_min, gc_bf16_to_f32, gc_f32_to_bf16, gc_minf(x, y))
GC_HALF_OP(gc_bf16_max, gc_bf16_to_f32, gc_f32_to_bf16, gc_maxf(x, y))

#define GC_FLOAT_OP(name, T, fn) \
static void name(void *in, void *inout, int *len, MPI_Datatype *dt) { \
	const T *s = (const T *)in; \
	T *d = (T *)inout; \
	int i, n = *len; \
	(void)dt; \
	for (i = 0; i < n; i++) d[i] = fn(d[i], s[i]); \
}
GC_FLOAT_OP(gc_f32_min, float, gc_minf)
GC_FLOAT_OP(gc_f32_max, float, gc_maxf)
GC_FLOAT_OP(gc_f64_min, double, gc_mind)
GC_FLOAT_OP(gc_f64_max, double, gc_maxd)

// The user-defined ops, indexed [f16, bf16, f32, f64][Sum, Prod, Min, Max];
// f32 and f64 Sum and Prod use MPI's own.
static MPI_User_function *const gc_user_fns[4][4] = {
	{gc_f16_sum, gc_f16_prod, gc_f16_min, gc_f16_max},
	{gc_bf16_sum, gc_bf16_prod, gc_bf16_min, gc_bf16_max},
	{NULL, NULL, gc_f32_min, gc_f32_max},
	{NULL, NULL, gc_f64_min, gc_f64_max},
};
static MPI_Op gc_user_ops[4][4];
static int gc_user_ops_made;

static int gc_make_ops(void) {
	int i, j, rc;
	if (gc_user_ops_made) return MPI_SUCCESS;
	for (i = 0; i < 4; i++) {
		for (j = 0; j < 4; j++) {
			gc_user_ops[i][j] = MPI_OP_NULL;
			if (gc_user_fns[i][j] == NULL) continue;
			rc = MPI_Op_create(gc_user_fns[i][j], 1, &gc_user_ops[i][j]);
			if (rc != MPI_SUCCESS) return rc;
		}
	}
	gc_user_ops_made = 1;
	return MPI_SUCCESS;
}

// gc_op maps a (dtype, op) pair to an MPI_Op; Avg reduces as Sum. Pairs
// the comm package refuses (bitwise on floats) give MPI_OP_NULL.
static MPI_Op gc_op(int dt, int op) {
	int row = -1;
	if (op == gcAvg) op = gcSum;
	switch (dt) {
	case gcFloat16: row = 0; break;
	case gcBFloat16: row = 1; break;
	case gcFloat32: row = 2; break;
	case gcFloat64: row = 3; break;
	}
	if (row >= 0) {
		if (op > gcMax) return MPI_OP_NULL;
		if (gc_user_fns[row][op] != NULL) return gc_user_ops[row][op];
	}
	switch (op) {
	case gcSum: return MPI_SUM;
	case gcProd: return MPI_PROD;
	case gcMin: return MPI_MIN;
	case gcMax: return MPI_MAX;
	case gcBAnd: return MPI_BAND;
	case gcBOr: return MPI_BOR;
	case gcBXor: return MPI_BXOR;
	}
	return MPI_OP_NULL;
}

// gc_reduce_local applies the user-defined function of (dt, op) to n
// elements without MPI (for the tests that compare it with the Go kernels).
int gc_reduce_local(int dt, int op, void *in, void *inout, int n) {
	int row = -1;
	MPI_Datatype t = gc_type(dt);
	if (op == gcAvg) op = gcSum;
	switch (dt) {
	case gcFloat16: row = 0; break;
	case gcBFloat16: row = 1; break;
	case gcFloat32: row = 2; break;
	case gcFloat64: row = 3; break;
	}
	if (row < 0 || op > gcMax || gc_user_fns[row][op] == NULL) return -1;
	gc_user_fns[row][op](in, inout, &n, &t);
	return 0;
}

// ---- initialisation ----

// Go needs its own handlers for fault signals (nil dereferences are SIGSEGV
// panics). Open MPI 4.1 leaves handlers that are already installed alone,
// but MPIs may install theirs at init (Open MPI's opal_signal list): put
// Go's back, whatever MPI did.
static const int gc_fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define GC_NSIGNALS ((int)(sizeof gc_fault_signals / sizeof gc_fault_signals[0]))

int gc_init(int want, int *provided, int *already) {
	struct sigaction saved[GC_NSIGNALS];
	int i, flag = 0, rc;
	MPI_Initialized(&flag);
	*already = flag;
	if (flag) {
		MPI_Query_thread(provided);
		return gc_make_ops();
	}
	for (i = 0; i < GC_NSIGNALS; i++) sigaction(gc_fault_signals[i], NULL, &saved[i]);
	rc = MPI_Init_thread(NULL, NULL, want, provided);
	for (i = 0; i < GC_NSIGNALS; i++) sigaction(gc_fault_signals[i], &saved[i], NULL);
	if (rc != MPI_SUCCESS) return rc;
	return gc_make_ops();
}

int gc_tag_ub(void) {
	int *ub = NULL, flag = 0;
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
	return flag && ub != NULL ? *ub : 32767;
}

void gc_world_rank_size(int *rank, int *size) {
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
}

static int gc_dup(MPI_Comm in, MPI_Comm *out) {
	int rc = MPI_Comm_dup(in, out);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
}

// gc_world_open makes a world's three communicators: collectives and
// point to point, monitored barriers, abort notices.
int gc_world_open(MPI_Comm *comm, MPI_Comm *mb, MPI_Comm *ab) {
	int rc = gc_dup(MPI_COMM_WORLD, comm);
	if (rc == MPI_SUCCESS) rc = gc_dup(*comm, mb);
	if (rc == MPI_SUCCESS) rc = gc_dup(*comm, ab);
	return rc;
}

int gc_group_open(MPI_Comm parent, int *members, int n, int tag, MPI_Comm *comm, MPI_Comm *mb) {
	MPI_Group all, sub;
	int rc = MPI_Comm_group(parent, &all);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Group_incl(all, n, members, &sub);
	MPI_Group_free(&all);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_create_group(parent, sub, tag, comm);
	MPI_Group_free(&sub);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
	if (rc == MPI_SUCCESS) rc = gc_dup(*comm, mb);
	return rc;
}

void gc_rank_size(MPI_Comm c, int *rank, int *size) {
	MPI_Comm_rank(c, rank);
	MPI_Comm_size(c, size);
}

void gc_free(MPI_Comm *c) {
	if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

int gc_local(MPI_Comm c, int *rank, int *size) {
	MPI_Comm local;
	int rc = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_rank(local, rank);
	MPI_Comm_size(local, size);
	MPI_Comm_free(&local);
	return MPI_SUCCESS;
}

void gc_error_string(int code, char *buf, int *class) {
	int len = 0;
	buf[0] = 0;
	if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) len = 0;
	buf[len] = 0;
	if (MPI_Error_class(code, class) != MPI_SUCCESS) *class = -1;
}

// ---- operations ----

gc_req *gc_req_new(int nints, int arena) {
	size_t head = (sizeof(gc_req) + (size_t)nints * sizeof(int) + 7) & ~(size_t)7;
	gc_req *r = (gc_req *)malloc(head + (size_t)arena);
	if (r == NULL) return NULL;
	memset(r, 0, head);
	r->req = MPI_REQUEST_NULL;
	r->ints = (int *)(r + 1);
	r->arena = (char *)r + head;
	r->arena_len = arena;
	return r;
}

void gc_req_reset(gc_req *q) { q->req = MPI_REQUEST_NULL; }

// Empty buffers arrive as NULL; MPI gets distinct valid addresses instead.
static char gc_empty[2];
#define GC_S(p) ((p) != NULL ? (p) : (void *)&gc_empty[0])
#define GC_R(p) ((p) != NULL ? (p) : (void *)&gc_empty[1])
#define GC_SEND(p, inplace) ((inplace) ? MPI_IN_PLACE : GC_S(p))

// gc_coll performs the collective kind (gcColl* of mpi_shim.h) with the
// blocking MPI function when blocking is set, else starts it with the
// nonblocking one into q's request. The V variants read their count and
// displacement arrays from q->ints (so q is needed for them even when
// blocking): counts[size], displs[size] (AllGatherV, GatherV, ScatterV),
// counts[size] (ReduceScatterV), sendcounts, sdispls, recvcounts, rdispls
// (AllToAllV). sn is this rank's send count (AllGatherV, GatherV) or
// receive count (ScatterV).
#define GC_DO(B, NB, ...) (blocking ? B(__VA_ARGS__) : NB(__VA_ARGS__, &q->req))
int gc_coll(int kind, int blocking, uintptr_t sp, uintptr_t rp, int n, int sn, int dt, int op, int root, int inplace,
            int size, MPI_Comm c, gc_req *q) {
	void *s = (void *)sp, *r = (void *)rp;
	MPI_Datatype t = gc_type(dt);
	int *in = q != NULL ? q->ints : NULL;
	switch (kind) {
	case gcCollAllReduce:
		return GC_DO(MPI_Allreduce, MPI_Iallreduce, GC_SEND(s, inplace), GC_R(r), n, t, gc_op(dt, op), c);
	case gcCollReduce:
		return GC_DO(MPI_Reduce, MPI_Ireduce, GC_SEND(s, inplace), GC_R(r), n, t, gc_op(dt, op), root, c);
	case gcCollBroadcast:
		return GC_DO(MPI_Bcast, MPI_Ibcast, GC_R(r), n, t, root, c);
	case gcCollAllGather:
		return GC_DO(MPI_Allgather, MPI_Iallgather, GC_SEND(s, inplace), n, t, GC_R(r), n, t, c);
	case gcCollAllGatherV:
		return GC_DO(MPI_Allgatherv, MPI_Iallgatherv, GC_SEND(s, inplace), sn, t, GC_R(r), in, in + size, t, c);
	case gcCollGather:
		return GC_DO(MPI_Gather, MPI_Igather, GC_SEND(s, inplace), n, t, GC_R(r), n, t, root, c);
	case gcCollGatherV:
		return GC_DO(MPI_Gatherv, MPI_Igatherv, GC_SEND(s, inplace), sn, t, GC_R(r), in, in + size, t, root, c);
	case gcCollScatter:
		return GC_DO(MPI_Scatter, MPI_Iscatter, GC_S(s), n, t, inplace ? MPI_IN_PLACE : GC_R(r), n, t, root, c);
	case gcCollScatterV:
		return GC_DO(MPI_Scatterv, MPI_Iscatterv, GC_S(s), in, in + size, t, inplace ? MPI_IN_PLACE : GC_R(r), sn, t, root, c);
	case gcCollReduceScatter:
		return GC_DO(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, GC_S(s), GC_R(r), n, t, gc_op(dt, op), c);
	case gcCollReduceScatterV:
		return GC_DO(MPI_Reduce_scatter, MPI_Ireduce_scatter, GC_S(s), GC_R(r), in, t, gc_op(dt, op), c);
	case gcCollAllToAll:
		return GC_DO(MPI_Alltoall, MPI_Ialltoall, GC_S(s), n, t, GC_R(r), n, t, c);
	case gcCollAllToAllV:
		return GC_DO(MPI_Alltoallv, MPI_Ialltoallv, GC_S(s), in, in + size, t, GC_R(r), in + 2 * size, in + 3 * size, t, c);
	case gcCollBarrier:
		return blocking ? MPI_Barrier(c) : MPI_Ibarrier(c, &q->req);
	}
	return MPI_ERR_OTHER;
}
#undef GC_DO

// gc_ibcast starts a broadcast (Bootstrap's).
int gc_ibcast(void *b, int n, int dt, int root, MPI_Comm c, gc_req *q) {
	return MPI_Ibcast(GC_R(b), n, gc_type(dt), root, c, &q->req);
}

int gc_isend(void *b, int n, int dt, int peer, int tag, MPI_Comm c, gc_req *q) {
	return MPI_Isend(GC_S(b), n, gc_type(dt), peer, tag, c, &q->req);
}

// peer < 0 receives from any source.
int gc_irecv(void *b, int n, int dt, int peer, int tag, MPI_Comm c, gc_req *q) {
	return MPI_Irecv(GC_R(b), n, gc_type(dt), peer < 0 ? MPI_ANY_SOURCE : peer, tag, c, &q->req);
}

// gc_test returns -1 while q is pending, else MPI's return code (the
// status is in q->st).
int gc_test(gc_req *q) {
	int flag = 0;
	int rc = MPI_Test(&q->req, &flag, &q->st);
	if (rc != MPI_SUCCESS) return rc;
	return flag ? MPI_SUCCESS : -1;
}

int gc_cancel(gc_req *q) { return MPI_Cancel(&q->req); }

int gc_source(gc_req *q) { return q->st.MPI_SOURCE; }

int gc_bytes(gc_req *q) {
	int n = 0;
	if (MPI_Get_count(&q->st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED) return -1;
	return n;
}

int gc_cancelled(gc_req *q) {
	int flag = 0;
	MPI_Test_cancelled(&q->st, &flag);
	return flag;
}

void gc_yield(void) { sched_yield(); }

void gc_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

// gc_bench_iallreduce runs iters in-place MPI_Iallreduce + MPI_Test loops
// on two floats, all in C (BenchmarkOverhead's probe of what the Go side
// costs).
int gc_bench_iallreduce(MPI_Comm c, int iters) {
	float buf[2] = {1, 2};
	int i, done, rc;
	MPI_Request req;
	for (i = 0; i < iters; i++) {
		rc = MPI_Iallreduce(MPI_IN_PLACE, buf, 2, MPI_FLOAT, MPI_SUM, c, &req);
		if (rc != MPI_SUCCESS) return rc;
		done = 0;
		while (!done) {
			rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
			if (rc != MPI_SUCCESS) return rc;
		}
		buf[0] = 1;
	}
	return MPI_SUCCESS;
}

// gc_bench_allreduce runs iters in-place blocking MPI_Allreduces on two
// floats (BenchmarkOverhead's probe of a blocking call from Go).
int gc_bench_allreduce(MPI_Comm c, int iters) {
	float buf[2] = {1, 2};
	int i, rc;
	for (i = 0; i < iters; i++) {
		rc = MPI_Allreduce(MPI_IN_PLACE, buf, 2, MPI_FLOAT, MPI_SUM, c);
		if (rc != MPI_SUCCESS) return rc;
		buf[0] = 1;
	}
	return MPI_SUCCESS;
}

// gc_improbe is MPI_Improbe for a message from peer (any source if < 0)
// with tag: *found says whether one matched; if so, *msg is the matched
// message (receive it with gc_imrecv), *source its sender and *bytes its
// length (-1 if MPI cannot say).
int gc_improbe(int peer, int tag, MPI_Comm c, int *found, MPI_Message *msg, int *source, int *bytes) {
	MPI_Status st;
	int rc = MPI_Improbe(peer < 0 ? MPI_ANY_SOURCE : peer, tag, c, found, msg, &st);
	if (rc != MPI_SUCCESS || !*found) return rc;
	*source = st.MPI_SOURCE;
	if (MPI_Get_count(&st, MPI_BYTE, bytes) != MPI_SUCCESS || *bytes == MPI_UNDEFINED) *bytes = -1;
	return MPI_SUCCESS;
}

// gc_imrecv receives the message gc_improbe matched into b (n elements
// of dt): MPI_Imrecv.
int gc_imrecv(void *b, int n, int dt, MPI_Message *msg, gc_req *q) {
	return MPI_Imrecv(GC_R(b), n, gc_type(dt), msg, &q->req);
}
