#!/bin/sh
# compare-mpi.sh: issue 20's comparison, rerunnable anywhere Open MPI's
# headers are installed: gocomm on its MPI backend (the mpi-backend series:
# commbench built with -tags mpi, under mpirun) against the same
# MPI_Allreduce from internal/bench/peers/mpi_bench.c (mpi-shm), both with
# --mca btl self,vader, 2 ranks, float32, 8 B .. 64 MiB, runs interleaved,
# medians of 3; the table shows each run's loop time per iteration and
# its 99th-percentile iteration (medians over the runs) and the ratio
# mpi-backend/mpi-shm (above 1, gocomm is faster). The load average is
# printed before and after: the figures mean little on a busy machine.
#
# Extra arguments go to "commbench compare" (see commbench compare -h),
# e.g.  bench/compare-mpi.sh --runs 5
#
# Writes compare-mpi.{json,csv,svg} in the current directory.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -tags mpi -o "$bin/commbench" ./cmd/commbench)
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
"$bin/commbench" compare -n 2 -d float32 --runs 3 --series mpi-backend,mpi-shm,mpi-shm-mt \
	--op allreduce -b 8 -e 64M -f 2 -w 100 -i 1000 --budget 256M \
	--json compare-mpi.json --csv compare-mpi.csv --plot compare-mpi.svg "$@"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
