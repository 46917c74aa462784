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
// gocomm's own knobs (GOCOMM_*, all optional) are read by comm.Init, not by
// Read; docs/tuning.md in the module's source lists each with its Options
// field, default and when to change it.
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
