#!/bin/bash
for round in 1 2 3 4 5; do
  for alg in linear ring tree rd; do
    /tmp/commbench -n 4 -b 64K -e 16M -f 4 -i 30 -w 5 --algo allreduce=$alg -q 2>&1 | awk -v a=$alg -v r=$round '$1 ~ /^[0-9]+$/ {print r, a, $1, $6}'
  done
done
