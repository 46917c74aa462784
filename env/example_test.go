package env_test

import (
	"fmt"

	"github.com/gocomm/comm/env"
)

func ExampleRead() {
	// What torchrun --nnodes 2 --nproc_per_node 2 gives the second rank of
	// node 0 (os.Getenv in a real program: pass nil).
	vars := map[string]string{
		"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
		"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True",
		"TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_RUN_ID": "job7",
	}
	e, err := env.Read(func(k string) string { return vars[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v: rank %d of %d, local %d of %d, node %d\n", e.Launcher, e.Rank, e.Size, e.LocalRank, e.LocalSize, e.NodeRank)
	fmt.Printf("meet: %v store at %s, keys under %s\n", e.Rendezvous.Kind, e.Rendezvous.Addr, e.Rendezvous.Prefix)

	_, err = env.Read(func(k string) string { return map[string]string{"OMPI_COMM_WORLD_RANK": "3"}[k] })
	fmt.Println(err)
	// Output:
	// env://: rank 1 of 4, local 1 of 2, node 0
	// meet: agent-tcp store at 10.0.0.1:29500, keys under gocomm/torchelastic/job7/attempt_0
	// comm: environment: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not: Open MPI's mpirun sets both; set OMPI_COMM_WORLD_SIZE to the number of ranks (or unset OMPI_COMM_WORLD_RANK for a world of one)
}
