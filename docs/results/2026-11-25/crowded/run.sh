#!/bin/bash
# 4 ranks on 2 CPUs, all-reduce forced algorithms, interleaved rounds
for round in 1 2 3 4 5 6 7 8 9 10; do
  for alg in linear ring rd tree; do
    /tmp/commbench -n 4 -b 8 -e 64K -f 8 -i 2000 -w 500 --algo allreduce=$alg -q 2>&1 | awk -v a=$alg -v r=$round '$1 ~ /^[0-9]+$/ {print r, a, $1, $6}'
  done
done
