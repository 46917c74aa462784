// Command commrun starts the ranks of a gocomm job on this host, as torchrun
// does for PyTorch: every rank gets RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT, its output is
// prefixed with "[rank] ", SIGINT and SIGTERM are forwarded, and when one
// rank fails the others are stopped and commrun exits non-zero with a
// summary naming the rank.
//
//	commrun -n 4 -- ./train -epochs 5
//	commrun -n 8 --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 -- ./train
//
// Run commrun -h for every flag; the logic is launch.Main.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gocomm/comm/launch"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(launch.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, signals))
}
