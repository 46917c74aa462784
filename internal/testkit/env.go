package testkit

import (
	"os"
	"strings"
)

// LauncherFreeEnv is this process's environment without any launcher's
// variables (torchrun's, Open MPI's, MPICH's, SLURM's) or the meeting
// place, followed by extra, so that a child started with it is placed only
// by what the test adds.
func LauncherFreeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "PMI"), strings.HasPrefix(k, "SLURM"),
			strings.HasPrefix(k, "TORCHELASTIC_"), strings.HasPrefix(k, "MPI_LOCAL"),
			k == "RANK", k == "WORLD_SIZE", k == "LOCAL_RANK", k == "LOCAL_WORLD_SIZE",
			k == "MASTER_ADDR", k == "MASTER_PORT", k == "GOCOMM_INIT_METHOD", k == "GOCOMM_BIND":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
