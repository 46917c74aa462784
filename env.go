package comm

// The environment contract is package env's: the variables launchers set,
// the launcher families, Environment and the choice of the meeting place.
// These are its names as package comm has always exported them; Init reads
// the environment through package env (options.go).

import (
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/env"
)

// Environment variables of the contract (package env documents them).
const (
	// torchrun, DeepSpeed, Kubeflow, commrun.
	EnvRank           = env.EnvRank
	EnvWorldSize      = env.EnvWorldSize
	EnvLocalRank      = env.EnvLocalRank
	EnvLocalWorldSize = env.EnvLocalWorldSize
	EnvGroupRank      = env.EnvGroupRank
	EnvGroupWorldSize = env.EnvGroupWorldSize
	EnvMasterAddr     = env.EnvMasterAddr
	EnvMasterPort     = env.EnvMasterPort
	// torchrun's agent already hosts a TCP store at MASTER_ADDR:MASTER_PORT
	// when this is "True".
	EnvUseAgentStore = env.EnvUseAgentStore
	EnvRestartCount  = env.EnvRestartCount
	EnvRunID         = env.EnvRunID

	// Open MPI.
	EnvOMPIRank      = env.EnvOMPIRank
	EnvOMPISize      = env.EnvOMPISize
	EnvOMPILocalRank = env.EnvOMPILocalRank
	EnvOMPILocalSize = env.EnvOMPILocalSize

	// MPICH, Hydra, Intel MPI (PMI).
	EnvPMIRank       = env.EnvPMIRank
	EnvPMISize       = env.EnvPMISize
	EnvPMILocalRank  = env.EnvPMILocalRank
	EnvPMILocalRanks = env.EnvPMILocalRanks

	// SLURM.
	EnvSlurmProcID    = env.EnvSlurmProcID
	EnvSlurmNTasks    = env.EnvSlurmNTasks
	EnvSlurmLocalID   = env.EnvSlurmLocalID
	EnvSlurmNodeID    = env.EnvSlurmNodeID
	EnvSlurmJobID     = env.EnvSlurmJobID
	EnvSlurmStepID    = env.EnvSlurmStepID
	EnvSlurmNodeList  = env.EnvSlurmNodeList
	EnvSlurmStepNodes = env.EnvSlurmStepNodes

	// gocomm's own knobs (see the table on Environment).
	EnvBackend    = env.EnvBackend
	EnvTimeout    = env.EnvTimeout
	EnvAlgoPrefix = env.EnvAlgoPrefix
	EnvSecret     = env.EnvSecret
	EnvStoreAuth  = env.EnvStoreAuth
	EnvSocketHost = env.EnvSocketHost
	// EnvSocketIfname chooses the data connections' address by interface
	// name; GLOO_SOCKET_IFNAME is read when it is unset.
	EnvSocketIfname  = env.EnvSocketIfname
	EnvGlooIfname    = env.EnvGlooIfname
	EnvTransport     = env.EnvTransport
	EnvHostID        = env.EnvHostID
	EnvSingleCopy    = env.EnvSingleCopy
	EnvSHMStores     = env.EnvSHMStores
	EnvTCPCongestion = env.EnvTCPCongestion
	// EnvBind binds the rank's process to CPUs: none (default), auto (its
	// share of the host's CPUs, by local rank) or a CPU list such as 0-3.
	EnvBind = env.EnvBind
	// EnvSettle is how long Init keeps a rank busy once set up (a
	// duration, or 0); the default is the backend's (10ms on mpi).
	EnvSettle     = env.EnvSettle
	EnvInitMethod = env.EnvInitMethod
	EnvDebug      = env.EnvDebug
	EnvProfile    = env.EnvProfile
	// DEEPSPEED_TIMEOUT (minutes) is honoured when GOCOMM_TIMEOUT is unset.
	EnvDeepSpeedTimeout = env.EnvDeepSpeedTimeout
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
