#!/bin/sh
# compare.sh: issue 4's side-by-side comparison, rerunnable anywhere the
# repository builds: gocomm (TCP, and shared memory once it exists) against
# Open MPI (vader and tcp BTLs, through bench/peers/mpi_bench.c under
# mpirun) and torch.distributed's gloo (bench/peers/gloo_bench.py under
# /usr/bin/python3), 2 ranks, float32, all-reduce 8 B .. 64 MiB and
# broadcast, all-gather, reduce-scatter and all-to-all at 64 MiB, medians of
# 3 interleaved runs. Extra arguments go to "commbench compare" (see
# commbench compare -h), e.g.  bench/compare.sh -n 4 --check
#
# Writes compare.json, compare.csv and compare.svg in the current directory.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/commbench" ./cmd/commbench)
defaults="-n 2 -d float32 --runs 3 --json compare.json --csv compare.csv --plot compare.svg"
# shellcheck disable=SC2086 # word splitting of defaults is intended
"$bin/commbench" compare $defaults "$@"
