package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gocomm/comm/internal/bench"
	// The mpi backend: a pure-Go stub that says how to get it, unless
	// built with -tags mpi (then: mpirun -np 2 commbench --backend mpi).
	_ "github.com/gocomm/comm/backend/mpi"
)

func main() {
	// Ctrl-C or SIGTERM cancels the run: ranks, mpirun and Python
	// harnesses started by commbench are stopped, not orphaned.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
