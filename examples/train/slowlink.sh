#!/usr/bin/env bash
# The train example's step time with and without overlap over slow links.
#
# Two ranks, each in its own network namespace (a "host" of its own, so
# they talk TCP, never shared memory), hang off a bridge; every link is
# shaped with tc tbf in both directions to the rate under test (as
# bench/slowlink.sh does). Each job trains 1 epoch with -optim adam in one
# of four modes: the Reducer overlapping backward, -overlap=false,
# -reducer=false and -zero=2; the modes alternate within each of -r rounds,
# and rank 0's "ms per step" line of every job is printed as
# "mode step_ms forward_and_backward_ms optimizer_step_ms".
# Nothing is changed outside the namespaces it creates, deleted on exit.
#
# Usage (as root, from the repository):
#   examples/train/slowlink.sh [-l 1gbit] [-r 3] [-- extra train flags]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/go/bin:$PATH

rate=1gbit
runs=3
while getopts "l:r:h" opt; do
  case $opt in
    l) rate=$OPTARG ;;
    r) runs=$OPTARG ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
extra=("$@")
if [ "$(id -u)" != 0 ]; then
  echo "slowlink.sh: needs root (ip netns, tc)" >&2
  exit 1
fi

tag=gctr$$
hosts=2
work=$(mktemp -d)
cleanup() {
  set +e
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

go build -o "$work/train" ./examples/train

ip netns add "${tag}sw"
ip -n "${tag}sw" link add br0 type bridge
ip -n "${tag}sw" link set br0 up
for ((i = 0; i < hosts; i++)); do
  h=${tag}h$i
  ip netns add "$h"
  ip -n "$h" link set lo up
  ip link add "${tag}p$i" netns "${tag}sw" type veth peer name eth0 netns "$h"
  ip -n "${tag}sw" link set "${tag}p$i" master br0 up
  ip -n "$h" addr add "10.78.0.$((i + 1))/24" dev eth0
  ip -n "$h" link set eth0 up
done
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

echo "train over $rate links, 2 ranks; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
port=29700
for ((r = 0; r < runs; r++)); do
  for mode in -overlap=true -overlap=false -reducer=false -zero=2; do
    port=$((port + 1))
    pids=()
    for ((i = 0; i < hosts; i++)); do
      ip netns exec "${tag}h$i" env RANK=$i WORLD_SIZE=$hosts LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
        MASTER_ADDR=10.78.0.1 MASTER_PORT=$port GOCOMM_HOST_ID="train-host$i" \
        "$work/train" -optim adam -epochs 1 -profile=false "$mode" ${extra[@]+"${extra[@]}"} >"$work/rank$i.out" 2>&1 &
      pids+=($!)
    done
    for i in "${!pids[@]}"; do
      wait "${pids[$i]}" || { echo "rank $i failed:" >&2; tail -20 "$work/rank$i.out" >&2; exit 1; }
    done
    echo "$mode $(sed -n 's/.*train: \([0-9.]*\) ms per step on rank 0: \([0-9.]*\) ms forward and backward, \([0-9.]*\) ms optimizer.*/\1 \2 \3/p' "$work/rank0.out")"
  done
done
