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
#   bench/slowlink.sh [-n "2 4"] [-l "1gbit 10gbit"] [-s 64M] [-r 5]
#
# It prints, per world size and link rate, the medians of -r runs of both
# all-reduces (interleaved in one job, each time the slowest rank's), and a
# Markdown table at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

ranks_list="2 4"
rates="1gbit 10gbit"
size=64M
runs=5
while getopts "n:l:s:r:h" opt; do
  case $opt in
    n) ranks_list=$OPTARG ;;
    l) rates=$OPTARG ;;
    s) size=$OPTARG ;;
    r) runs=$OPTARG ;;
    *) sed -n '2,19p' "$0"; exit 2 ;;
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
bin=$work/slowlink
hosts=0
for n in $ranks_list; do [ "$n" -gt "$hosts" ] && hosts=$n; done
pids=()

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ((i = 0; i < hosts; i++)); do ip netns del "${tag}h$i" 2>/dev/null; done
  ip netns del "${tag}sw" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$bin" ./bench/slowlink

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

# job runs one world of n ranks, rank i on host i, and prints rank 0's lines.
port=29600
job() {
  local n=$1 rate=$2 i out
  port=$((port + 1))
  pids=()
  for ((i = 0; i < n; i++)); do
    # GOCOMM_SOCKET_HOST: the data connections bind and publish the host's
    # address (issue 15: before its fix a multi-host job bound loopback).
    ip netns exec "${tag}h$i" env RANK=$i WORLD_SIZE=$n LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=10.77.0.1 MASTER_PORT=$port GOCOMM_HOST_ID="slowlink-host$i" \
      GOCOMM_SOCKET_HOST="10.77.0.$((i + 1))" GOCOMM_TIMEOUT=10m \
      "$bin" -size "$size" -runs "$runs" -label "$rate links" >"$work/rank$i.out" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { failed=1; echo "rank $i failed:"; tail -20 "$work/rank$i.out"; }
  done
  pids=()
  [ $failed = 0 ] || exit 1
  cat "$work/rank0.out"
}

echo "slowlink: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); no netem on this kernel: no added delay"
table="| ranks | link (tbf, both directions) | all-reduce | onebit.AllReduce | speedup |
|---|---|---|---|---|"
for n in $ranks_list; do
  for rate in $rates; do
    shape "$rate"
    out=$(job "$n" "$rate")
    echo "$out"
    line=$(grep 'slowlink: [0-9]* ranks' <<<"$out")
    plain=$(sed -E 's/.*all_reduce ([0-9.]+) ms.*/\1/' <<<"$line")
    one=$(sed -E 's/.*onebit ([0-9.]+) ms.*/\1/' <<<"$line")
    speed=$(sed -E 's/.*onebit ([0-9.]+x) faster.*/\1/' <<<"$line")
    table+="
| $n | ${rate/gbit/ Gbit\/s} | $plain ms | $one ms | $speed |"
  done
done
echo
echo "$size float32 per rank, medians of $runs runs (interleaved), each the slowest rank's time:"
echo "$table"
