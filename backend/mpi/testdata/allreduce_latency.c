// allreduce_latency measures the latency of an 8-byte (two float)
// all-reduce with plain MPI, for comparison with the same loop through
// gocomm's mpi backend (BenchmarkOverhead in backend/mpi). Rank 0 prints
// the median over batches of the time per operation, for the blocking
// MPI_Allreduce and for MPI_Iallreduce completed by an MPI_Test loop
// (which is what the backend does).
//
//	mpicc -O2 allreduce_latency.c -o allreduce_latency
//	mpirun -np 2 ./allreduce_latency [batches] [per-batch] [level]
//
// With a third argument MPI is initialised with MPI_Init_thread at that
// thread level, "funneled", "serialized" or "multiple" (as gocomm's mpi
// driver asks for), and the names printed end in "-" and the level.
// Open MPI 4.1 costs the same at all three: it turns its locks on for
// any level above MPI_THREAD_SINGLE (2 ranks, vader, 2026-11-25, 3
// interleaved rounds: single 279-287 ns, funneled 426-431, serialized
// 408-430, multiple 397-438).
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n) {
	qsort(v, n, sizeof v[0], cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
	int batches = argc > 1 ? atoi(argv[1]) : 200;
	int per = argc > 2 ? atoi(argv[2]) : 100;
	const char *level = argc > 3 ? argv[3] : "";
	int required = strcmp(level, "funneled") == 0 ? MPI_THREAD_FUNNELED
		: strcmp(level, "serialized") == 0 ? MPI_THREAD_SERIALIZED
		: strcmp(level, "multiple") == 0 ? MPI_THREAD_MULTIPLE : -1;
	int rank, mode, b, i, provided;
	float buf[2] = {1, 2};
	double *samples = malloc(sizeof(double) * batches);
	const char *names[2] = {"c-allreduce-8B", "c-iallreduce-test-8B"};

	if (required >= 0) {
		MPI_Init_thread(&argc, &argv, required, &provided);
	} else {
		MPI_Init(&argc, &argv);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (mode = 0; mode < 2; mode++) {
		for (b = -batches / 10; b < batches; b++) { // the first tenth warms up
			double t0;
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			for (i = 0; i < per; i++) {
				if (mode == 0) {
					MPI_Allreduce(MPI_IN_PLACE, buf, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				} else {
					MPI_Request req;
					int done = 0;
					MPI_Iallreduce(MPI_IN_PLACE, buf, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
					while (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
				}
				buf[0] = 1; // keep the values finite
			}
			if (b >= 0) samples[b] = (MPI_Wtime() - t0) / per * 1e9;
		}
		if (rank == 0) printf("%s%s%s median_ns=%.1f\n", names[mode], required >= 0 ? "-" : "", required >= 0 ? level : "", median(samples, batches));
	}
	MPI_Finalize();
	free(samples);
	return 0;
}
