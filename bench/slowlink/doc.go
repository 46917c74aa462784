// Command slowlink times a plain all-reduce against the 1-bit compressed
// all-reduce (package onebit) on the same float32 buffer, interleaved in one
// job: each run does both, in alternating order, and each time is the
// slowest rank's. Rank 0 prints the medians and the ratio.
//
// bench/slowlink.sh runs it on simulated hosts (network namespaces joined
// by a bridge, links shaped with tc tbf); run by itself it starts -n ranks
// on this host, or joins the world of a launcher:
//
//	go run ./bench/slowlink -n 2 -size 64M -runs 5
//	commrun -n 4 -- slowlink -size 16M
package main
