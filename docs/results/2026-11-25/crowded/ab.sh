#!/bin/bash
for round in $(seq 1 15); do
  for v in before after; do
    /tmp/commbench-$v -n 4 -b 1K -e 64K -f 2 -i 500 -w 100 -q 2>&1 | awk -v a=$v -v r=$round '$1 ~ /^[0-9]+$/ {print r, a, $1, $6}'
  done
done
