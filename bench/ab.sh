#!/bin/bash
# ab.sh: an interleaved A/B of two commbench binaries (two commits of
# gocomm), to show a change is free of regressions. Each round runs every
# case with both binaries, the order alternating from round to round, so
# that the machine's drift falls on both alike; the table gives each
# case's median time over the rounds, the ratio new/old, and in how many
# rounds the new binary was faster.
#
#   git stash; go build -o /tmp/old ./cmd/commbench; git stash pop
#   go build -o /tmp/new ./cmd/commbench
#   bench/ab.sh /tmp/old /tmp/new [rounds (7)] [outdir]
#
# Cases: all-reduce of 8 B, 64 KiB and 64 MiB and all-gather of 64 MiB, 2
# ranks, over shared memory and TCP. Needs python3 for the medians.
set -u
old=$1 new=$2 rounds=${3:-7} out=${4:-$(mktemp -d)}
mkdir -p "$out"
: >"$out/all.csv"
cases=(
	"allreduce@8 -w 200 -i 20000"
	"allreduce@64K -w 50 -i 2000"
	"allreduce@64M -w 2 -i 10"
	"allgather@64M -w 2 -i 10"
)
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
	for t in shm tcp; do
		for c in "${cases[@]}"; do
			set -- $c
			op=$1
			shift
			for who in $order; do
				bin=$old
				[ "$who" = new ] && bin=$new
				if ! "$bin" -n 2 --transport "$t" --op "$op" "$@" -q --csv "$out/one.csv" >/dev/null 2>&1; then
					echo "ab.sh: $who $t $op failed" >&2
					continue
				fi
				tail -n +2 "$out/one.csv" | awk -F, -v w="$who" -v t="$t" -v r="$r" '{print w","t","r","$2","$3","$11}' >>"$out/all.csv"
			done
		done
	done
done
python3 - "$out/all.csv" <<'PY'
import csv, statistics as st, sys
d = {}
for who, t, r, op, size, us in csv.reader(open(sys.argv[1])):
    d.setdefault((t, op, int(size)), {}).setdefault(who, []).append(float(us))
print(f"{'transport':9} {'op':9} {'size':>9} {'old us':>12} {'new us':>12} {'new/old':>8}  new faster")
for k in sorted(d):
    o, n = d[k].get('old', []), d[k].get('new', [])
    if not o or not n:
        continue
    wins = sum(1 for a, b in zip(o, n) if b < a)
    print(f"{k[0]:9} {k[1]:9} {k[2]:>9} {st.median(o):12.3f} {st.median(n):12.3f} {st.median(n)/st.median(o):8.3f}  {wins}/{min(len(o), len(n))}")
PY
