#!/usr/bin/env bash
# Slow-link benchmark: plain all-reduce against the 1-bit compressed
# all-reduce (package onebit) between simulated hosts.
#
# Each rank runs in its own network namespace (a "host", with its own
# GOCOMM_HOST_ID, so ranks talk TCP and never shared memory); the hosts hang
# off a bridge in one more namespace (the "switch"), and each host's link is
# shaped with tc tbf in both directions to the rate under test. This kernel
# has no netem, so no delay is added: the links are slow but not far.
# Nothing is changed outside the namespaces this script creates, and they
# are deleted on exit, however the script ends.
#
# Usage (as root, from the repository):
#   bench/slowlink.sh [-n "2 4"] [-l "1gbit 10gbit"] [-s 64M] [-r 5] [-i 3]
#
# Each measurement is a commbench job (--op allreduce@SIZE,onebit@SIZE, one
# warm-up and -i timed iterations each; commbench reports the timed loop's
# time per iteration, the slowest rank's). -r jobs per world size and link
# rate, the op order alternating from job to job; the script prints every
# job's times, their medians and a Markdown table at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

ranks_list="2 4"
rates="1gbit 10gbit"
size=64M
runs=5
iters=3
while getopts "n:l:s:r:i:h" opt; do
  case $opt in
    n) ranks_list=$OPTARG ;;
    l) rates=$OPTARG ;;
    s) size=$OPTARG ;;
    r) runs=$OPTARG ;;
    i) iters=$OPTARG ;;
    *) sed -n '2,21p' "$0"; exit 2 ;;
  esac
done

if [ "$(id -u)" != 0 ]; then
  echo "slowlink.sh: needs root (ip netns, tc)" >&2
  exit 1
fi
for tool in ip tc; do
  command -v $tool >/dev/null || { echo "slowlink.sh: $tool not found (apt-get install iproute2)" >&2; exit 1; }
done

tag=gcsl$$ # unique per run: namespaces ${tag}sw, ${tag}h0, ...
work=$(mktemp -d)
bin=$work/commbench
hosts=0
for n in $ranks_list; do [ "$n" -gt "$hosts" ] && hosts=$n; done
cleanup() {
  set +e
  # Ranks still running (an interrupted job) are in our namespaces.
  for ((i = 0; i < hosts; i++)); do
    ip netns pids "${tag}h$i" 2>/dev/null | xargs -r kill 2>/dev/null
  done
  sleep 0.2
  for ((i = 0; i < hosts; i++)); do
    ip netns pids "${tag}h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "${tag}h$i" 2>/dev/null
  done
  ip netns del "${tag}sw" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$bin" ./cmd/commbench

# The switch and the hosts: host i is 10.77.0.(i+1) on eth0, plugged into
# port p$i of bridge br0 in the switch namespace.
ip netns add "${tag}sw"
ip -n "${tag}sw" link add br0 type bridge
ip -n "${tag}sw" link set br0 up
ip -n "${tag}sw" link set lo up
for ((i = 0; i < hosts; i++)); do
  h=${tag}h$i
  ip netns add "$h"
  ip -n "$h" link set lo up
  ip link add "${tag}p$i" netns "${tag}sw" type veth peer name eth0 netns "$h"
  ip -n "${tag}sw" link set "${tag}p$i" master br0 up
  ip -n "$h" addr add "10.77.0.$((i + 1))/24" dev eth0
  ip -n "$h" link set eth0 up
done

# shape sets every link to rate in both directions: the host's egress on
# its eth0 and the switch's egress on its port. The bucket holds about a
# millisecond at the rate (and at least 64 KiB, one GSO packet).
shape() {
  local rate=$1 num bits burst
  num=${rate%%[a-zA-Z]*}
  case ${rate#"$num"} in
    gbit) bits=$((num * 1000000000)) ;;
    mbit) bits=$((num * 1000000)) ;;
    *) echo "slowlink.sh: rate $rate: use NNmbit or NNgbit" >&2; exit 2 ;;
  esac
  burst=$((bits / 8 / 1000))
  [ "$burst" -lt 65536 ] && burst=65536
  for ((i = 0; i < hosts; i++)); do
    tc -n "${tag}h$i" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
    tc -n "${tag}sw" qdisc replace dev "${tag}p$i" root tbf rate "$rate" burst "$burst" latency 50ms
  done
}

# job runs one commbench world of n ranks, rank i on host i, with ops (a
# commbench --op list), and writes "op time_us" per op from rank 0's table
# to $work/job.out. It runs in this shell (not in $(...)), so that a signal
# reaches the traps at once while it waits.
# GOCOMM_HOST_ID makes every namespace a host of its own; the ranks find
# their reachable address themselves (before issue 15 was fixed they bound
# loopback and needed GOCOMM_SOCKET_HOST=10.77.0.(i+1)).
port=29600
job() {
  local n=$1 ops=$2 i pids=()
  port=$((port + 1))
  for ((i = 0; i < n; i++)); do
    ip netns exec "${tag}h$i" env RANK=$i WORLD_SIZE=$n LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=10.77.0.1 MASTER_PORT=$port GOCOMM_HOST_ID="slowlink-host$i" GOCOMM_TIMEOUT=10m \
      "$bin" --op "$ops" -w 1 -i "$iters" >"$work/rank$i.out" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { failed=1; echo "rank $i failed:" >&2; tail -20 "$work/rank$i.out" >&2; }
  done
  [ $failed = 0 ] || exit 1
  # commbench prints "# <op>" above each op's rows; the time is column 6.
  awk '/^# [a-z]+$/ {op = $2} /^ +[0-9]+ / && op != "" {print op, $6; op = ""}' "$work/rank0.out" >"$work/job.out"
}

# median prints the median of its arguments (the mean of the middle two
# for an even count).
median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

ms() { awk -v us="$1" 'BEGIN {printf "%.1f", us / 1000}'; }

echo "slowlink: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); no netem on this kernel: no added delay"
table="| ranks | link (tbf, both directions) | all-reduce | onebit.AllReduce | speedup |
|---|---|---|---|---|"
for n in $ranks_list; do
  for rate in $rates; do
    shape "$rate"
    plain=() one=()
    for ((r = 0; r < runs; r++)); do
      ops="allreduce@$size,onebit@$size"
      [ $((r % 2)) = 1 ] && ops="onebit@$size,allreduce@$size" # interleave
      job "$n" "$ops"
      plain+=("$(awk '$1 == "allreduce" {print $2}' "$work/job.out")")
      one+=("$(awk '$1 == "onebit" {print $2}' "$work/job.out")")
    done
    p=$(median "${plain[@]}") o=$(median "${one[@]}")
    speed=$(awk -v p="$p" -v o="$o" 'BEGIN {printf "%.1fx", p / o}')
    echo "$n ranks, $rate links: all-reduce $(ms "$p") ms, onebit $(ms "$o") ms (medians of $runs jobs), $speed;" \
      "runs (us): all-reduce ${plain[*]}; onebit ${one[*]}"
    table+="
| $n | ${rate/gbit/ Gbit\/s} | $(ms "$p") ms | $(ms "$o") ms | $speed |"
  done
done
echo
echo "$size float32 per rank, medians of $runs commbench jobs (op order alternating), each the slowest rank's time per iteration over $iters iterations:"
echo "$table"
