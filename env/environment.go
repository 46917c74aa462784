package env

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ErrEnvironment is wrapped by every error Read (and comm.Init) returns
// because the environment (or comm.Options) does not describe a usable
// world: a launcher's variable missing or malformed, or no meeting place for
// the ranks. The message names the variable and what to set.
var ErrEnvironment = errors.New("comm: environment")

// Errorf returns an error wrapping ErrEnvironment whose message, formatted
// as fmt.Sprintf does, should name the variable at fault and what to set.
func Errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrEnvironment, fmt.Sprintf(format, args...))
}

// Launcher is the family of launcher whose variables describe the world.
type Launcher int

// Launcher families, in the order Read looks for them.
const (
	LauncherNone    Launcher = iota // no launcher: a world of one
	LauncherTorch                   // torchrun, DeepSpeed, Kubeflow, commrun, Spawn (RANK, WORLD_SIZE)
	LauncherOpenMPI                 // Open MPI (OMPI_COMM_WORLD_*)
	LauncherPMI                     // MPICH, Hydra, Intel MPI (PMI_RANK, PMI_SIZE)
	LauncherSlurm                   // SLURM srun (SLURM_PROCID, SLURM_NTASKS)
)

// String names the launcher family as messages and logs show it.
func (l Launcher) String() string {
	switch l {
	case LauncherNone:
		return "none"
	case LauncherTorch:
		return "env://"
	case LauncherOpenMPI:
		return "openmpi"
	case LauncherPMI:
		return "mpich"
	case LauncherSlurm:
		return "slurm"
	}
	return "Launcher(" + strconv.Itoa(int(l)) + ")"
}

// Environment is the world the launcher's variables describe, as comm.Init
// reads it. Read returns it; Init applies comm.Options on top.
//
// gocomm's own knobs, all optional, are read by comm.Init, not by Read:
//
//	variable              Options field  meaning
//	GOCOMM_BACKEND        Backend        backend driver: native (default), mpi with -tags mpi
//	GOCOMM_TIMEOUT        Timeout        bound of every op without a ctx deadline, and of Init:
//	                                     a Go duration (90s, 30m) or seconds; default 30m
//	                                     (DEEPSPEED_TIMEOUT, in minutes, when this is unset)
//	GOCOMM_ALGO_<OP>      Algorithms     force an algorithm for ALLREDUCE, REDUCE, BROADCAST,
//	                                     ALLGATHER, REDUCESCATTER, GATHER, SCATTER, ALLTOALL,
//	                                     BARRIER: auto, ring, recursive-doubling (rd),
//	                                     halving-doubling (hd), tree, pairwise, linear
//	GOCOMM_SECRET         Secret         shared secret authenticating data connections and,
//	                                     when rank 0 hosts the store, store connections
//	GOCOMM_STORE_AUTH     -              1 (default): with a secret, the store rank 0 hosts
//	                                     requires the handshake; 0: it does not, for jobs
//	                                     where torch ranks share it (they cannot authenticate).
//	                                     A store torchrun's agent hosts is never authenticated
//	GOCOMM_SOCKET_HOST    ListenHost     host/IP data connections bind to and publish
//	GOCOMM_SOCKET_IFNAME  SocketIfname   interface whose address they use instead: eth0, a
//	                                     prefix (eth), =exact, ^excluded,list
//	                                     (GLOO_SOCKET_IFNAME when unset); default: the
//	                                     address of the route to MASTER_ADDR
//	GOCOMM_TRANSPORT      Transport      auto (default: shared memory between ranks of one
//	                                     host, TCP between hosts), tcp, or shm
//	GOCOMM_HOST_ID        HostID         replaces the detected host identity (host name and
//	                                     boot id): ranks with equal ids share memory
//	GOCOMM_SHM_SINGLE_COPY SingleCopyBytes  smallest message copied straight out of the sender's
//	                                     memory on one host (bytes, or off); default off, or
//	                                     256 KiB when the host's ranks outnumber its CPUs
//	GOCOMM_SHM_STORES     SHMStores      how ranks write what peers on their host read next:
//	                                     cached (plain copies), bypass (stores that bypass
//	                                     the writer's cache), or auto (default: cached when
//	                                     the host's CPUs share one last-level cache)
//	GOCOMM_TCP_CONGESTION TCPCongestion  TCP congestion control of data connections (Linux):
//	                                     auto (default: reno within a host, the system's
//	                                     elsewhere), system, or an algorithm (reno, bbr...)
//	GOCOMM_BIND           -              CPUs the rank's process runs on: none (default),
//	                                     auto (local rank r of n gets block r of n equal
//	                                     blocks of the CPUs it may use; when ranks outnumber
//	                                     CPUs, GOMAXPROCS its share instead), or a list such
//	                                     as 0-3,8. GOMAXPROCS follows unless set. commrun,
//	                                     Spawn and commbench set auto unless it is set
//	GOCOMM_SETTLE         -              how long Init keeps the rank busy once set up, so
//	                                     that its first operations do not meet the Go
//	                                     runtime monitor's start-up polling: a duration
//	                                     (10ms) or 0; default 10ms on the mpi backends;
//	                                     on native 20ms for a rank alone in its process
//	                                     with one P that reaches its peers through
//	                                     shared memory, else 0
//	GOCOMM_INIT_METHOD    -              meeting place: env:// (default), tcp://host:port
//	                                     (rank 0 hosts), file:///shared/path (a file store;
//	                                     use a fresh path per job: the last rank removes it)
//	GOCOMM_DEBUG          Logger         1/debug, info, warn, error: log to stderr at that
//	                                     level (when Options.Logger is nil); 0 or empty: off
//	GOCOMM_PROFILE        Profile        comms-logger configuration: 1, JSON, or a JSON file
//	                                     (a whole DeepSpeed config's comms_logger block)
//	GOCOMM_PROFILE_OPS, _VERBOSE, _DEBUG, _LAYOUT, GOCOMM_TRACE_DIR
//	                      Profile        the profiler's details; see package profile
type Environment struct {
	Launcher             Launcher
	Rank, Size           int
	LocalRank, LocalSize int
	// NodeRank is this host's index in the job (GROUP_RANK, CROSS_RANK,
	// SLURM_NODEID), -1 when the launcher does not say.
	NodeRank int
	// Rendezvous is the meeting place; Kind is RendezvousNone for a world
	// of one.
	Rendezvous Rendezvous
}

// Read reads the launcher's variables through getenv (nil means
// os.Getenv) in a program that cannot meet through MPI; it is
// Reader{Getenv: getenv}.Read(). A partial or malformed set of variables
// is an error wrapping ErrEnvironment that names what is missing and how to
// fix it; no launcher at all is a world of one.
func Read(getenv func(string) string) (Environment, error) {
	return Reader{Getenv: getenv}.Read()
}

// Reader reads the variables of the contract. Its methods only call
// Getenv, so a Reader is safe for concurrent use when Getenv is; the zero
// value reads os.Getenv.
type Reader struct {
	// Getenv replaces os.Getenv (tests, comm.Options.Getenv); nil is
	// os.Getenv.
	Getenv func(string) string
	// MPIBootstrap says the program can bring the ranks of an MPI job
	// together through MPI itself (comm.Init sets it when the mpi driver
	// is a working backend.Bootstrapper: a cgo build with -tags mpi).
	// Then an MPI job on several hosts with no other meeting place gets
	// RendezvousMPI instead of an error.
	MPIBootstrap bool
}

// Read reads the launcher's variables, without comm.Options, as the
// package-level Read does.
func (e Reader) Read() (Environment, error) { return e.read() }

// Get returns the variable name with surrounding white space trimmed, ""
// when it is unset.
func (e Reader) Get(name string) string {
	getenv := e.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return strings.TrimSpace(getenv(name))
}

// Int reads the integer variable name: 0 and no error when it is unset, an
// error wrapping ErrEnvironment that names it when it is not an integer.
func (e Reader) Int(name string) (int, error) {
	v := e.Get(name)
	if v == "" {
		return 0, nil
	}
	return intOf(name, v)
}

// first returns the first set variable of names and its value.
func (e Reader) first(names ...string) (string, string) {
	for _, n := range names {
		if v := e.Get(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// intOf parses the integer variable name (already read as v).
func intOf(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, Errorf("%s=%q is not an integer", name, v)
	}
	return n, nil
}

// pair reads a rank variable and a size variable of one launcher: both or
// neither must be set. ok is false when neither is.
func (e Reader) pair(who, rankVar, sizeVar string) (rank, size int, ok bool, err error) {
	rv, sv := e.Get(rankVar), e.Get(sizeVar)
	switch {
	case rv == "" && sv == "":
		return 0, 0, false, nil
	case sv == "":
		return 0, 0, false, Errorf("%s is set but %s is not: %s sets both; set %s to the number of ranks (or unset %s for a world of one)", rankVar, sizeVar, who, sizeVar, rankVar)
	case rv == "":
		return 0, 0, false, Errorf("%s is set but %s is not: %s sets both; set %s to this process's rank (or unset %s for a world of one)", sizeVar, rankVar, who, rankVar, sizeVar)
	}
	if rank, err = intOf(rankVar, rv); err != nil {
		return 0, 0, false, err
	}
	if size, err = intOf(sizeVar, sv); err != nil {
		return 0, 0, false, err
	}
	return rank, size, true, nil
}

// checkWorld validates a rank, size, local rank and local size.
func checkWorld(from string, rank, size, localRank, localSize int) error {
	switch {
	case size < 1:
		return Errorf("%s: world size %d, want >= 1", from, size)
	case rank < 0 || rank >= size:
		return Errorf("%s: rank %d out of range for world size %d", from, rank, size)
	case localSize < 1 || localSize > size:
		return Errorf("%s: local world size %d, want 1..%d (the world size)", from, localSize, size)
	case localRank < 0 || localRank >= localSize:
		return Errorf("%s: local rank %d out of range for local world size %d", from, localRank, localSize)
	}
	return nil
}

// read finds the launcher family and reads its variables.
func (e Reader) read() (Environment, error) {
	env := Environment{NodeRank: -1}
	var err error
	switch {
	case e.Get(EnvRank) != "" || e.Get(EnvWorldSize) != "" || e.Get(EnvLocalRank) != "":
		env.Launcher = LauncherTorch
		err = e.readTorch(&env)
	case e.Get(EnvOMPIRank) != "" || e.Get(EnvOMPISize) != "":
		env.Launcher = LauncherOpenMPI
		err = e.readMPI(&env, "Open MPI's mpirun", EnvOMPIRank, EnvOMPISize, EnvOMPILocalRank, EnvOMPILocalSize)
	case e.Get(EnvPMIRank) != "" || e.Get(EnvPMISize) != "":
		env.Launcher = LauncherPMI
		err = e.readMPI(&env, "the PMI launcher (MPICH's mpiexec/Hydra)", EnvPMIRank, EnvPMISize, EnvPMILocalRank, EnvPMILocalRanks)
	case e.Get(EnvSlurmProcID) != "" && e.slurmStep() != "":
		env.Launcher = LauncherSlurm
		err = e.readSlurm(&env)
	default:
		// No launcher (SLURM_PROCID without a step id is a batch script or
		// an salloc shell, which is one process): a world of one.
		env.Size, env.LocalSize = 1, 1
		return env, nil
	}
	if err != nil {
		return Environment{}, err
	}
	if err := checkWorld(env.Launcher.String()+" environment", env.Rank, env.Size, env.LocalRank, env.LocalSize); err != nil {
		return Environment{}, err
	}
	if env.Size > 1 {
		if env.Rendezvous, err = e.rendezvous(&env); err != nil {
			return Environment{}, err
		}
	}
	return env, nil
}

// readTorch reads the torchrun/DeepSpeed/Kubeflow variables.
func (e Reader) readTorch(env *Environment) error {
	const who = "torchrun (and commrun, DeepSpeed, Kubeflow)"
	rank, size, ok, err := e.pair(who, EnvRank, EnvWorldSize)
	if err != nil {
		return err
	}
	if !ok {
		return Errorf("%s=%s is set but %s and %s are not: a launcher that sets LOCAL_RANK must also set RANK and WORLD_SIZE (or unset LOCAL_RANK for a world of one)", EnvLocalRank, e.Get(EnvLocalRank), EnvRank, EnvWorldSize)
	}
	env.Rank, env.Size = rank, size
	sizeVar, sv := e.first(EnvLocalWorldSize, "LOCAL_SIZE")
	lv := e.Get(EnvLocalRank)
	switch {
	case lv != "" && sv != "":
		if env.LocalRank, err = intOf(EnvLocalRank, lv); err != nil {
			return err
		}
		if env.LocalSize, err = intOf(sizeVar, sv); err != nil {
			return err
		}
	case lv != "":
		return Errorf("%s is set but %s is not: set it to the number of ranks on this host", EnvLocalRank, EnvLocalWorldSize)
	case sv != "":
		return Errorf("%s is set but %s is not: set it to this process's rank among the ranks on this host", sizeVar, EnvLocalRank)
	default:
		// Kubeflow's PyTorchJob sets neither: one rank per pod. On
		// loopback every rank is on this host.
		if size == 1 || isLoopback(e.Get(EnvMasterAddr)) {
			env.LocalRank, env.LocalSize = rank, size
		} else {
			env.LocalRank, env.LocalSize = 0, 1
		}
	}
	if name, v := e.first(EnvGroupRank, "CROSS_RANK"); v != "" {
		if env.NodeRank, err = intOf(name, v); err != nil {
			return err
		}
	}
	return nil
}

// readMPI reads an MPI launcher's four variables.
func (e Reader) readMPI(env *Environment, who, rankVar, sizeVar, localRankVar, localSizeVar string) error {
	rank, size, _, err := e.pair(who, rankVar, sizeVar)
	if err != nil {
		return err
	}
	env.Rank, env.Size = rank, size
	lr, ls, ok, err := e.pair(who, localRankVar, localSizeVar)
	if err != nil {
		return err
	}
	if !ok {
		return Errorf("%s=%d and %s=%d are set but %s and %s are not: %s sets them; set them to this rank's place among the ranks of its host", rankVar, rank, sizeVar, size, localRankVar, localSizeVar, who)
	}
	env.LocalRank, env.LocalSize = lr, ls
	return nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
