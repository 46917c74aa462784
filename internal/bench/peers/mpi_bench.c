/*
 * mpi_bench: commbench's peer harness for MPI (Open MPI here).
 *
 *   mpicc -O2 -o mpi_bench mpi_bench.c
 *   mpirun -np 2 --mca pml ob1 --mca btl self,vader ./mpi_bench plan.txt raw.txt
 *
 * It runs the cases of a commbench plan file (format: bench/plan.go) with
 * the MPI collectives that match commbench's ops, timed and checked the way
 * bench.Run does it, and rank 0 writes the raw results (format:
 * bench/result.go) for commbench compare to summarise. Each timed iteration
 * runs from the clock read that ended the one before it (one read per
 * iteration, as commbench's loop); the times are then combined across ranks
 * with MPI_MAX.
 * Cases MPI cannot run (avg, for one) are written as "skip" lines.
 *
 * commbench compare compiles this file with mpicc at run time.
 */
#include <mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_ALLREDUCE = 1, OP_REDUCE, OP_BROADCAST, OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL,
       OP_SENDRECV, OP_PINGPONG, OP_BARRIER, OP_COUNT };
static const char *op_names[OP_COUNT] = {"", "allreduce", "reduce", "broadcast", "allgather",
                                         "reducescatter", "alltoall", "sendrecv", "pingpong", "barrier"};

enum { RED_SUM, RED_PROD, RED_MIN, RED_MAX, RED_AVG, RED_BAND, RED_BOR, RED_BXOR, RED_COUNT };
static const char *red_names[RED_COUNT] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};

enum { T_INT8, T_INT16, T_INT32, T_INT64, T_UINT8, T_UINT16, T_UINT32, T_UINT64, T_FLOAT32, T_FLOAT64, T_COUNT };
static const char *type_names[T_COUNT] = {"int8", "int16", "int32", "int64", "uint8", "uint16",
                                          "uint32", "uint64", "float32", "float64"};
static const int type_sizes[T_COUNT] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};

#define TAG 7

typedef struct {
    int op;
    long long bytes;
    int warmup, iters, root;
} bench_case;

typedef struct {
    int type, red, check;
    int ncases;
    bench_case *cases;
} bench_plan;

static int rank, nranks;

static void die(const char *msg, const char *detail) {
    fprintf(stderr, "mpi_bench: rank %d: %s%s%s\n", rank, msg, detail ? ": " : "", detail ? detail : "");
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static int lookup(const char *s, const char **names, int n) {
    for (int i = 0; i < n; i++)
        if (names[i][0] && strcmp(s, names[i]) == 0) return i;
    return -1;
}

static void read_plan(const char *path, bench_plan *p) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open the plan", path);
    char line[512], a[64], b[64];
    int lineno = 0, cap = 0;
    memset(p, 0, sizeof *p);
    p->type = p->red = -1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (lineno == 1) {
            if (strcmp(line, "gocomm-bench-plan 1") != 0) die("not a plan file", path);
            continue;
        }
        if (line[0] == 0 || line[0] == '#') continue;
        if (sscanf(line, "dtype %63s", a) == 1) {
            p->type = lookup(a, type_names, T_COUNT);
        } else if (sscanf(line, "redop %63s", a) == 1) {
            p->red = lookup(a, red_names, RED_COUNT);
            if (p->red < 0) die("unknown redop", a);
        } else if (sscanf(line, "check %d", &p->check) == 1) {
        } else if (strncmp(line, "case ", 5) == 0) {
            bench_case c;
            if (sscanf(line, "case %63s %lld %d %d %d", b, &c.bytes, &c.warmup, &c.iters, &c.root) != 5)
                die("bad case line", line);
            c.op = lookup(b, op_names, OP_COUNT);
            if (c.op < 0) die("unknown op", b);
            if (c.iters < 1 || c.warmup < 0 || c.bytes < 0 || c.root < 0) die("bad case line", line);
            if (p->ncases == cap) {
                cap = cap ? 2 * cap : 32;
                p->cases = realloc(p->cases, cap * sizeof *p->cases);
                if (!p->cases) die("out of memory", NULL);
            }
            p->cases[p->ncases++] = c;
        } else {
            die("unknown plan line", line);
        }
    }
    fclose(f);
    if (p->type < 0) die("the plan's dtype has no MPI counterpart here", NULL);
    if (p->red < 0) die("the plan has no redop", NULL);
}

static MPI_Datatype mpi_type(int t) {
    switch (t) {
    case T_INT8: return MPI_INT8_T;
    case T_INT16: return MPI_INT16_T;
    case T_INT32: return MPI_INT32_T;
    case T_INT64: return MPI_INT64_T;
    case T_UINT8: return MPI_UINT8_T;
    case T_UINT16: return MPI_UINT16_T;
    case T_UINT32: return MPI_UINT32_T;
    case T_UINT64: return MPI_UINT64_T;
    case T_FLOAT32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
    }
}

/* mpi_op returns the MPI reduction for red, or MPI_OP_NULL when MPI has
 * none (avg). */
static MPI_Op mpi_op(int red) {
    switch (red) {
    case RED_SUM: return MPI_SUM;
    case RED_PROD: return MPI_PROD;
    case RED_MIN: return MPI_MIN;
    case RED_MAX: return MPI_MAX;
    case RED_BAND: return MPI_BAND;
    case RED_BOR: return MPI_BOR;
    case RED_BXOR: return MPI_BXOR;
    default: return MPI_OP_NULL;
    }
}

static void set_elem(void *buf, int t, long i, double v) {
    switch (t) {
    case T_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case T_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case T_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case T_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case T_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case T_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case T_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case T_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case T_FLOAT32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

static double get_elem(const void *buf, int t, long i) {
    switch (t) {
    case T_INT8: return ((const int8_t *)buf)[i];
    case T_INT16: return ((const int16_t *)buf)[i];
    case T_INT32: return ((const int32_t *)buf)[i];
    case T_INT64: return (double)((const int64_t *)buf)[i];
    case T_UINT8: return ((const uint8_t *)buf)[i];
    case T_UINT16: return ((const uint16_t *)buf)[i];
    case T_UINT32: return ((const uint32_t *)buf)[i];
    case T_UINT64: return (double)((const uint64_t *)buf)[i];
    case T_FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* The check pattern of bench/check.go: Pattern (with mix32, MurmurHash3's
 * finaliser) and Expected. */
static uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

static int pattern(int t, int red, int r, long i) {
    uint32_t h = mix32((uint32_t)i);
    if (red == RED_PROD) return 1 + (int)(((h >> 8) + (uint32_t)r) % 2u);
    uint32_t range = (t == T_INT8 || t == T_UINT8) ? 8u : 64u;
    return 1 + (int)(((h >> 8) + (uint32_t)(3 * r)) % range);
}

static double expected(int t, int red, long i) {
    double acc = pattern(t, red, 0, i);
    for (int r = 1; r < nranks; r++) {
        double v = pattern(t, red, r, i);
        switch (red) {
        case RED_PROD: acc *= v; break;
        case RED_MIN: acc = fmin(acc, v); break;
        case RED_MAX: acc = fmax(acc, v); break;
        case RED_BAND: acc = (double)((long long)acc & (long long)v); break;
        case RED_BOR: acc = (double)((long long)acc | (long long)v); break;
        case RED_BXOR: acc = (double)((long long)acc ^ (long long)v); break;
        default: acc += v; break;
        }
    }
    return acc;
}

static void fill(void *buf, int t, int red, int r, long off, long n) {
    for (long j = 0; j < n; j++) set_elem(buf, t, j, pattern(t, red, r, off + j));
}

static long count_from(const void *buf, int t, int red, int r, long off, long n) {
    long w = 0;
    for (long j = 0; j < n; j++)
        if (get_elem(buf, t, j) != pattern(t, red, r, off + j)) w++;
    return w;
}

static long count_reduced(const void *buf, int t, int red, long off, long n) {
    long w = 0;
    for (long j = 0; j < n; j++)
        if (get_elem(buf, t, j) != expected(t, red, off + j)) w++;
    return w;
}

typedef struct {
    int op, root, t, red;
    long count, blk;
    void *send, *recv;
    MPI_Datatype dt;
    MPI_Op mop;
} call;

static void run_once(const call *c) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    switch (c->op) {
    case OP_ALLREDUCE: MPI_Allreduce(c->send, c->recv, (int)c->count, c->dt, c->mop, MPI_COMM_WORLD); break;
    case OP_REDUCE: MPI_Reduce(c->send, c->recv, (int)c->count, c->dt, c->mop, c->root, MPI_COMM_WORLD); break;
    case OP_BROADCAST: MPI_Bcast(c->recv, (int)c->count, c->dt, c->root, MPI_COMM_WORLD); break;
    case OP_ALLGATHER:
        MPI_Allgather(c->send, (int)c->blk, c->dt, c->recv, (int)c->blk, c->dt, MPI_COMM_WORLD);
        break;
    case OP_REDUCESCATTER:
        MPI_Reduce_scatter_block(c->send, c->recv, (int)c->blk, c->dt, c->mop, MPI_COMM_WORLD);
        break;
    case OP_ALLTOALL:
        MPI_Alltoall(c->send, (int)c->blk, c->dt, c->recv, (int)c->blk, c->dt, MPI_COMM_WORLD);
        break;
    case OP_SENDRECV:
        MPI_Sendrecv(c->send, (int)c->count, c->dt, next, TAG, c->recv, (int)c->count, c->dt, prev, TAG,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    case OP_PINGPONG:
        if (rank == 0) {
            MPI_Send(c->send, (int)c->count, c->dt, 1, TAG, MPI_COMM_WORLD);
            MPI_Recv(c->recv, (int)c->count, c->dt, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(c->recv, (int)c->count, c->dt, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(c->send, (int)c->count, c->dt, 0, TAG, MPI_COMM_WORLD);
        }
        break;
    case OP_BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    }
}

static int reduces(int op) { return op == OP_ALLREDUCE || op == OP_REDUCE || op == OP_REDUCESCATTER; }
static int blocked(int op) { return op == OP_ALLGATHER || op == OP_REDUCESCATTER || op == OP_ALLTOALL; }

/* prepare fills the inputs with the pattern and clears the outputs, as
 * bench's checker.prepare does. */
static void prepare(const call *c, long nsend, long nrecv) {
    int es = type_sizes[c->t];
    if (c->op == OP_BROADCAST) {
        if (rank == c->root) fill(c->recv, c->t, c->red, rank, 0, c->count);
        else memset(c->recv, 0, (size_t)c->count * es);
        return;
    }
    if (c->op == OP_BARRIER) return;
    fill(c->send, c->t, c->red, rank, 0, nsend);
    memset(c->recv, 0, (size_t)nrecv * es);
}

static long count_wrong(const call *c) {
    int es = type_sizes[c->t];
    long w = 0, blk = c->blk;
    switch (c->op) {
    case OP_ALLREDUCE: return count_reduced(c->recv, c->t, c->red, 0, c->count);
    case OP_REDUCE: return rank == c->root ? count_reduced(c->recv, c->t, c->red, 0, c->count) : 0;
    case OP_BROADCAST: return count_from(c->recv, c->t, c->red, c->root, 0, c->count);
    case OP_ALLGATHER:
        for (int p = 0; p < nranks; p++)
            w += count_from((char *)c->recv + (size_t)p * blk * es, c->t, c->red, p, 0, blk);
        return w;
    case OP_REDUCESCATTER: return count_reduced(c->recv, c->t, c->red, (long)rank * blk, blk);
    case OP_ALLTOALL:
        for (int p = 0; p < nranks; p++)
            w += count_from((char *)c->recv + (size_t)p * blk * es, c->t, c->red, p, (long)rank * blk, blk);
        return w;
    case OP_SENDRECV: return count_from(c->recv, c->t, c->red, (rank + nranks - 1) % nranks, 0, c->count);
    case OP_PINGPONG:
        if (rank == 0) return count_from(c->recv, c->t, c->red, 1, 0, c->count);
        if (rank == 1) return count_from(c->recv, c->t, c->red, 0, 0, c->count);
        return 0;
    }
    return 0;
}

int main(int argc, char **argv) {
    /* "multiple" as a third argument: MPI_THREAD_MULTIPLE, as gocomm's MPI
       backend asks for (the mpi-shm-mt series). */
    if (argc == 4 && strcmp(argv[3], "multiple") == 0) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) die("MPI_THREAD_MULTIPLE not provided", NULL);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 3 && argc != 4) die("usage: mpi_bench plan.txt raw.txt [multiple]", NULL);
    bench_plan plan;
    read_plan(argv[1], &plan);
    int es = type_sizes[plan.type];

    long long maxbytes = 0;
    int maxiters = 0;
    for (int i = 0; i < plan.ncases; i++) {
        if (plan.cases[i].bytes > maxbytes) maxbytes = plan.cases[i].bytes;
        if (plan.cases[i].iters > maxiters) maxiters = plan.cases[i].iters;
    }
    void *send = calloc((size_t)maxbytes + 64, 1), *recv = calloc((size_t)maxbytes + 64, 1);
    double *times = calloc((size_t)maxiters, sizeof(double));
    if (!send || !recv || !times) die("out of memory", NULL);

    FILE *out = NULL;
    if (rank == 0) {
        out = fopen(argv[2], "w");
        if (!out) die("cannot create the results file", argv[2]);
        fprintf(out, "gocomm-bench-raw 1\nranks %d\n", nranks);
    }
    for (int k = 0; k < plan.ncases; k++) {
        bench_case *bc = &plan.cases[k];
        call c = {.op = bc->op, .root = bc->root, .t = plan.type, .red = plan.red, .send = send, .recv = recv,
                  .dt = mpi_type(plan.type), .mop = mpi_op(plan.red)};
        c.count = (long)(bc->bytes / es);
        c.blk = blocked(bc->op) ? c.count / nranks : c.count;
        long nsend = c.count, nrecv = c.count;
        if (bc->op == OP_ALLGATHER) nsend = c.blk;
        if (bc->op == OP_REDUCESCATTER) nrecv = c.blk;
        if (reduces(bc->op) && c.mop == MPI_OP_NULL) {
            if (rank == 0) fprintf(out, "skip %s %lld MPI has no %s reduction\n", op_names[bc->op], bc->bytes, red_names[plan.red]);
            continue;
        }
        if ((bc->op == OP_PINGPONG || bc->op == OP_SENDRECV) && nranks < 2) {
            if (rank == 0) fprintf(out, "skip %s %lld needs 2 ranks\n", op_names[bc->op], bc->bytes);
            continue;
        }
        prepare(&c, nsend, nrecv);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int w = 0; w < bc->warmup; w++) run_once(&c);
        /* One clock read per iteration, as commbench's own loop (bench/run.go). */
        double l0 = MPI_Wtime(), prev = l0;
        for (int it = 0; it < bc->iters; it++) {
            run_once(&c);
            double now = MPI_Wtime();
            times[it] = now - prev;
            prev = now;
        }
        double loop = (prev - l0) / bc->iters;
        MPI_Allreduce(MPI_IN_PLACE, times, bc->iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &loop, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        long long wrong = -1;
        if (plan.check) {
            prepare(&c, nsend, nrecv);
            run_once(&c);
            wrong = count_wrong(&c);
            MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        }
        if (rank == 0) {
            fprintf(out, "case %s %lld %d %d %lld", op_names[bc->op], bc->bytes, bc->warmup, bc->root, wrong);
            for (int it = 0; it < bc->iters; it++) fprintf(out, " %.9g", times[it] * 1e6);
            fprintf(out, "\nloop %.9g\n", loop * 1e6);
        }
    }
    if (rank == 0 && fclose(out) != 0) die("cannot write the results file", argv[2]);
    free(send);
    free(recv);
    free(times);
    free(plan.cases);
    MPI_Finalize();
    return 0;
}
