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
//
// Who may import it: nobody (a command). It imports package launch, and
// holds flags only.
package main
