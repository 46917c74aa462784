#!/bin/sh
# compare.sh: issue 4's and issue 12's side-by-side comparison, rerunnable
# anywhere the repository builds: gocomm (TCP, shared memory, and its MPI
# backend) against Open MPI (vader and tcp BTLs, through
# internal/bench/peers/mpi_bench.c under mpirun) both with its default algorithm
# choice (mpi-shm, mpi-tcp) and at its best (mpi-shm-best, mpi-tcp-best:
# per op and size the fastest of its tuned algorithms, each forced in a run
# of its own with --mca coll_tuned_use_dynamic_rules 1 --mca
# coll_tuned_<op>_algorithm K, for every K ompi_info lists), and
# torch.distributed's gloo (internal/bench/peers/gloo_bench.py under
# /usr/bin/python3), float32, medians of interleaved runs (every series
# and every K take turns within a round), in three passes:
#
#   1. latency: all-reduce 8 B .. 8 KiB with 1000 warm-ups and 2000
#      iterations per size (as OSU's micro-benchmarks run small messages:
#      a few dozen iterations measure the first calls after a size change,
#      not the steady state), medians of 5 runs: a series' run of the
#      whole pass lasts about half a second on 2 ranks, and this machine's
#      speed drifts within seconds;
#   2. mid: all-reduce 16 KiB .. 512 KiB with 200 warm-ups and 2000
#      iterations, at most 256 MiB moved per size (512 KiB: 512
#      iterations), medians of 5 runs: 50 iterations of 64 KiB over TCP
#      last 5 ms: a 2-rank TCP all-reduce of 64 and 256 KiB ran 0.94x and
#      0.85x of Open MPI's best in one whole run with 50, and 1.41-1.46x
#      and 1.10-1.13x in two passes of 200 and 5 runs right after
#      (docs/results/2026-11-29/tcp-mid-0715.txt);
#   3. bandwidth: all-reduce 1 MiB .. 64 MiB and broadcast, all-gather,
#      reduce-scatter and all-to-all at 64 MiB, 5 warm-ups and 50
#      iterations (at most 1 GiB moved per size), medians of 3 runs.
#
# Extra arguments go to every pass of "commbench compare" (see commbench
# compare -h), e.g.  bench/compare.sh -n 4 --check
#
# Cost: the best-of series run the MPI harness once per algorithm K, so
# per round and BTL the latency and mid passes start mpirun 6 more times
# each (all-reduce K 1..6) and the bandwidth pass 9 more (broadcast has 9), and every case
# runs once per K its op has: all-reduce 6x, broadcast 9x, all-gather 6x (5
# beyond 2 ranks), reduce-scatter 4x, all-to-all 5x (4), on vader and on
# tcp: 6-9x the time of the mpi-shm and mpi-tcp series. Narrow
# the sweep with --mpi-algos (repeatable), e.g.
#   bench/compare.sh --mpi-algos "allreduce=1,2,4,6 bcast=1,6,8,9"
# or leave the best-of series out with --series.
#
# Writes compare-latency.{json,csv,svg}, compare-mid.{json,csv,svg} and
# compare.{json,csv,svg} in the current directory (the JSON and CSV name each best-of row's algorithm,
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
common="-n 2 -d float32"
# shellcheck disable=SC2086 # word splitting of the options is intended
"$bin/commbench" compare $common --runs 5 --op allreduce -b 8 -e 8K -w 1000 -i 2000 \
	--json compare-latency.json --csv compare-latency.csv --plot compare-latency.svg "$@"
# shellcheck disable=SC2086
"$bin/commbench" compare $common --runs 5 --op allreduce -b 16K -e 512K -w 200 -i 2000 --budget 256M \
	--json compare-mid.json --csv compare-mid.csv --plot compare-mid.svg "$@"
# shellcheck disable=SC2086
"$bin/commbench" compare $common --runs 3 -b 1M \
	--json compare.json --csv compare.csv --plot compare.svg "$@"
