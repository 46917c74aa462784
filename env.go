package comm

// The environment contract is package env's: the variables launchers set,
// the launcher families, Environment and the choice of the meeting place.
// Package comm exports the types Init's results are made of; the
// variables' names are package env's (env.EnvRank, ...).

import (
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/env"
)

// ErrEnvironment is wrapped by every error Init returns because the
// environment (or Options) does not describe a usable world: a launcher's
// variable missing or malformed, or no meeting place for the ranks. The
// message names the variable and what to set. It is env.ErrEnvironment.
var ErrEnvironment = env.ErrEnvironment

// Launcher is the family of launcher whose variables describe the world
// (env.Launcher).
type Launcher = env.Launcher

// Launcher families, in the order Init looks for them.
const (
	LauncherNone    = env.LauncherNone    // no launcher: a world of one
	LauncherTorch   = env.LauncherTorch   // torchrun, DeepSpeed, Kubeflow, commrun, Spawn (RANK, WORLD_SIZE)
	LauncherOpenMPI = env.LauncherOpenMPI // Open MPI (OMPI_COMM_WORLD_*)
	LauncherPMI     = env.LauncherPMI     // MPICH, Hydra, Intel MPI (PMI_RANK, PMI_SIZE)
	LauncherSlurm   = env.LauncherSlurm   // SLURM srun (SLURM_PROCID, SLURM_NTASKS)
)

// RendezvousKind says how the ranks of a world meet (env.RendezvousKind).
type RendezvousKind = env.RendezvousKind

// Kinds of meeting place; package env documents each.
const (
	RendezvousNone  = env.RendezvousNone  // no store (a world of one, or Options.Store)
	RendezvousTCP   = env.RendezvousTCP   // rank 0 hosts a TCP store at Addr
	RendezvousAgent = env.RendezvousAgent // torchrun's agent hosts the store; every rank is a client
	RendezvousFile  = env.RendezvousFile  // a file store at Path
	RendezvousMPI   = env.RendezvousMPI   // MPI broadcasts rank 0's address (a -tags mpi build)
	RendezvousEtcd  = env.RendezvousEtcd  // an etcd cluster keeps the store; no rank hosts it
)

// Rendezvous is where the ranks of a world meet (env.Rendezvous).
type Rendezvous = env.Rendezvous

// Environment is the world the launcher's variables describe, as Init reads
// it (env.Environment, whose doc lists gocomm's own GOCOMM_* knobs).
// ReadEnvironment returns it; Init applies Options on top.
type Environment = env.Environment

// ReadEnvironment reads the launcher's variables through getenv (nil means
// os.Getenv), without Options, as Init does: in a build that can meet
// through MPI (the mpi driver, -tags mpi), an MPI job on several hosts with
// no other meeting place gets RendezvousMPI. A partial or malformed set of
// variables is an error wrapping ErrEnvironment that names what is missing
// and how to fix it; no launcher at all is a world of one.
func ReadEnvironment(getenv func(string) string) (Environment, error) {
	return env.Reader{Getenv: getenv, MPIBootstrap: mpiBootstrapper() != nil}.Read()
}

// mpiDriver is the name of the driver whose backend.Bootstrapper brings
// the ranks of an MPI job together (backend/mpi registers it; backends.go
// imports it).
const mpiDriver = "mpi"

// mpiBootstrapper returns the registered mpi driver as a
// backend.Bootstrapper when this build can bootstrap through it, else nil.
func mpiBootstrapper() backend.Bootstrapper {
	d, ok := backend.Lookup(mpiDriver)
	if !ok {
		return nil
	}
	b, ok := d.(backend.Bootstrapper)
	if !ok || !b.Available() {
		return nil
	}
	return b
}
