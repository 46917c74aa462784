#!/bin/sh
# compare.sh: issue 4's and issue 12's side-by-side comparison, rerunnable
# anywhere the repository builds: gocomm (TCP, shared memory, and its MPI
# backend) against Open MPI (vader and tcp BTLs, through
# bench/peers/mpi_bench.c under mpirun) both with its default algorithm
# choice (mpi-shm, mpi-tcp) and at its best (mpi-shm-best, mpi-tcp-best:
# per op and size the fastest of its tuned algorithms, each forced in a run
# of its own with --mca coll_tuned_use_dynamic_rules 1 --mca
# coll_tuned_<op>_algorithm K, for every K ompi_info lists), and
# torch.distributed's gloo (bench/peers/gloo_bench.py under
# /usr/bin/python3), float32, medians of 3 interleaved runs (every series
# and every K take turns within a round), in two passes:
#
#   1. latency: all-reduce 8 B .. 8 KiB with 1000 warm-ups and 2000
#      iterations per size (as OSU's micro-benchmarks run small messages:
#      a few dozen iterations measure the first calls after a size change,
#      not the steady state);
#   2. bandwidth: the all-reduce sweep 8 B .. 64 MiB and broadcast,
#      all-gather, reduce-scatter and all-to-all at 64 MiB, 5 warm-ups and
#      50 iterations (at most 1 GiB moved per size).
#
# Extra arguments go to both passes of "commbench compare" (see commbench
# compare -h), e.g.  bench/compare.sh -n 4 --check
#
# Cost: the best-of series run the MPI harness once per algorithm K, so
# per round and BTL the latency pass starts mpirun 6 more times (all-reduce
# K 1..6) and the bandwidth pass 9 more (broadcast has 9), and every case
# runs once per K its op has: all-reduce 6x, broadcast 9x, all-gather 6x (5
# beyond 2 ranks), reduce-scatter 4x, all-to-all 5x (4), on vader and on
# tcp: 6-9x the time of the mpi-shm and mpi-tcp series. Narrow
# the sweep with --mpi-algos (repeatable), e.g.
#   bench/compare.sh --mpi-algos "allreduce=1,2,4,6 bcast=1,6,8,9"
# or leave the best-of series out with --series.
#
# Writes compare-latency.{json,csv,svg} and compare.{json,csv,svg} in the
# current directory (the JSON and CSV name each best-of row's algorithm,
# and the JSON keeps every K's rows under "variants").
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# A signal ends the script through its EXIT trap (sh skips it otherwise).
trap 'exit 130' INT
trap 'exit 143' TERM
# With Open MPI's headers, a commbench with gocomm's MPI backend (the
# mpi-backend series); otherwise that series is reported as not run.
tags=""
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists ompi-c; then
	tags="-tags mpi"
fi
# shellcheck disable=SC2086 # $tags is empty or one flag
(cd "$root" && go build $tags -o "$bin/commbench" ./cmd/commbench)
common="-n 2 -d float32 --runs 3"
# shellcheck disable=SC2086 # word splitting of the options is intended
"$bin/commbench" compare $common --op allreduce -b 8 -e 8K -w 1000 -i 2000 \
	--json compare-latency.json --csv compare-latency.csv --plot compare-latency.svg "$@"
# shellcheck disable=SC2086
"$bin/commbench" compare $common \
	--json compare.json --csv compare.csv --plot compare.svg "$@"
