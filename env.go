package comm

// The environment contract lives in this one file. Init (through resolve)
// and the launchers in package launch (commrun, Spawn) read and write the
// variables named here and nowhere else.
//
// Precedence, first match wins:
//
//  1. Options: Rank/Size (and LocalRank/LocalSize), MasterAddr/MasterPort,
//     Store, Backend, Timeout, Secret, ListenHost, Algorithms, Logger.
//  2. torchrun, DeepSpeed, Kubeflow PyTorchJob, commrun, Spawn: RANK,
//     WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (DeepSpeed: LOCAL_SIZE),
//     GROUP_RANK (DeepSpeed: CROSS_RANK), MASTER_ADDR, MASTER_PORT,
//     TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_RUN_ID,
//     TORCHELASTIC_RESTART_COUNT.
//  3. Open MPI (mpirun, mpiexec, orterun, prterun): OMPI_COMM_WORLD_RANK,
//     OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
//     OMPI_COMM_WORLD_LOCAL_SIZE.
//  4. MPICH, Hydra, Intel MPI and other PMI launchers: PMI_RANK, PMI_SIZE,
//     MPI_LOCALRANKID, MPI_LOCALNRANKS.
//  5. SLURM srun (a job step): SLURM_PROCID, SLURM_STEP_NUM_TASKS or
//     SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE, SLURM_NODEID,
//     SLURM_STEP_NODELIST or SLURM_JOB_NODELIST, SLURM_JOB_ID.
//  6. Nothing: a world of one.
//
// The meeting place (rendezvous store) of a world of several ranks, first
// match wins: Options.Store; Options.MasterAddr/MasterPort;
// GOCOMM_INIT_METHOD (tcp://host:port or file:///path); MASTER_ADDR and
// MASTER_PORT (under torchrun with TORCHELASTIC_USE_AGENT_STORE=True every
// rank, rank 0 included, joins the store torchrun's agent already hosts
// there); for MPI launchers with every rank on one host, a file store in
// os.TempDir() named by the job's id; for SLURM (and MPI launchers inside
// a SLURM allocation), rank 0 hosts the TCP store on the first host of the
// node list, on a port derived from SLURM_JOB_ID and SLURM_STEP_ID; for MPI
// launchers on several hosts in a -tags mpi build, rank 0 hosts it on a
// free port whose address MPI broadcasts (mpi.Bootstrap).
// Anything else is an error that says which variables to set.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/gocomm/comm/core"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/backend/mpi"
	"github.com/gocomm/comm/profile"
	"github.com/gocomm/comm/rendezvous"
)

// Environment variables of the contract.
const (
	// torchrun, DeepSpeed, Kubeflow, commrun.
	EnvRank           = "RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalRank      = "LOCAL_RANK"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvGroupRank      = "GROUP_RANK"
	EnvGroupWorldSize = "GROUP_WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	// torchrun's agent already hosts a TCP store at MASTER_ADDR:MASTER_PORT
	// when this is "True".
	EnvUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE"
	EnvRestartCount  = "TORCHELASTIC_RESTART_COUNT"
	EnvRunID         = "TORCHELASTIC_RUN_ID"

	// Open MPI.
	EnvOMPIRank      = "OMPI_COMM_WORLD_RANK"
	EnvOMPISize      = "OMPI_COMM_WORLD_SIZE"
	EnvOMPILocalRank = "OMPI_COMM_WORLD_LOCAL_RANK"
	EnvOMPILocalSize = "OMPI_COMM_WORLD_LOCAL_SIZE"

	// MPICH, Hydra, Intel MPI (PMI).
	EnvPMIRank       = "PMI_RANK"
	EnvPMISize       = "PMI_SIZE"
	EnvPMILocalRank  = "MPI_LOCALRANKID"
	EnvPMILocalRanks = "MPI_LOCALNRANKS"

	// SLURM.
	EnvSlurmProcID    = "SLURM_PROCID"
	EnvSlurmNTasks    = "SLURM_NTASKS"
	EnvSlurmLocalID   = "SLURM_LOCALID"
	EnvSlurmNodeID    = "SLURM_NODEID"
	EnvSlurmJobID     = "SLURM_JOB_ID"
	EnvSlurmStepID    = "SLURM_STEP_ID"
	EnvSlurmNodeList  = "SLURM_JOB_NODELIST"
	EnvSlurmStepNodes = "SLURM_STEP_NODELIST"

	// gocomm's own knobs (see the table on Environment).
	EnvBackend    = "GOCOMM_BACKEND"
	EnvTimeout    = "GOCOMM_TIMEOUT"
	EnvAlgoPrefix = "GOCOMM_ALGO_" // + ALLREDUCE, BROADCAST, ...
	EnvSecret     = "GOCOMM_SECRET"
	EnvSocketHost = "GOCOMM_SOCKET_HOST"
	// EnvSocketIfname chooses the data connections' address by interface
	// name; GLOO_SOCKET_IFNAME is read when it is unset.
	EnvSocketIfname = "GOCOMM_SOCKET_IFNAME"
	EnvGlooIfname   = "GLOO_SOCKET_IFNAME"
	EnvTransport    = "GOCOMM_TRANSPORT" // auto, tcp or shm
	EnvHostID       = "GOCOMM_HOST_ID"   // replaces the detected host identity
	EnvSingleCopy   = "GOCOMM_SHM_SINGLE_COPY"
	EnvInitMethod   = "GOCOMM_INIT_METHOD"
	EnvDebug        = "GOCOMM_DEBUG"
	EnvProfile      = "GOCOMM_PROFILE"
	// DEEPSPEED_TIMEOUT (minutes) is honoured when GOCOMM_TIMEOUT is unset.
	EnvDeepSpeedTimeout = "DEEPSPEED_TIMEOUT"
)

// ErrEnvironment is wrapped by every error Init returns because the
// environment (or Options) does not describe a usable world: a launcher's
// variable missing or malformed, or no meeting place for the ranks. The
// message names the variable and what to set.
var ErrEnvironment = errors.New("comm: environment")

// Launcher is the family of launcher whose variables describe the world.
type Launcher int

// Launcher families, in the order Init looks for them.
const (
	LauncherNone    Launcher = iota // no launcher: a world of one
	LauncherTorch                   // torchrun, DeepSpeed, Kubeflow, commrun, Spawn (RANK, WORLD_SIZE)
	LauncherOpenMPI                 // Open MPI (OMPI_COMM_WORLD_*)
	LauncherPMI                     // MPICH, Hydra, Intel MPI (PMI_RANK, PMI_SIZE)
	LauncherSlurm                   // SLURM srun (SLURM_PROCID, SLURM_NTASKS)
)

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

// RendezvousKind says how the ranks of a world meet.
type RendezvousKind int

// Kinds of meeting place.
const (
	// RendezvousNone: no store (a world of one, or Options.Store).
	RendezvousNone RendezvousKind = iota
	// RendezvousTCP: rank 0 hosts a TCP store at Addr, the others dial it.
	RendezvousTCP
	// RendezvousAgent: a launcher (torchrun's agent) already hosts a
	// PyTorch TCPStore at Addr; every rank, rank 0 included, is a client.
	RendezvousAgent
	// RendezvousFile: a file store at Path, on a file system every rank
	// sees.
	RendezvousFile
	// RendezvousMPI: under an MPI launcher on several hosts, in a build
	// with -tags mpi, rank 0 picks a free port and MPI broadcasts its
	// address (mpi.Bootstrap); rank 0 then hosts a TCP store there.
	RendezvousMPI
)

func (k RendezvousKind) String() string {
	switch k {
	case RendezvousNone:
		return "none"
	case RendezvousTCP:
		return "tcp"
	case RendezvousAgent:
		return "agent-tcp"
	case RendezvousFile:
		return "file"
	case RendezvousMPI:
		return "mpi-bootstrap"
	}
	return "RendezvousKind(" + strconv.Itoa(int(k)) + ")"
}

// Rendezvous is where the ranks of a world meet.
type Rendezvous struct {
	Kind RendezvousKind
	// Addr is the store's "host:port" (TCP kinds).
	Addr string
	// Path is the store file (RendezvousFile). Init removes it when the
	// last rank closes its world.
	Path string
	// Prefix namespaces this job's keys in a shared store ("" for none):
	// under torchrun's agent store, one per restart attempt.
	Prefix string
	// From names the variables that chose this place, for messages.
	From string
}

// Environment is the world the launcher's variables describe, as Init reads
// it. ReadEnvironment returns it; Init applies Options on top.
//
// gocomm's own knobs, all optional:
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
//	GOCOMM_SECRET         Secret         shared secret authenticating data connections
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
//	                                     memory on one host (bytes, or off); default 256 KiB
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

// ReadEnvironment reads the launcher's variables through getenv (nil means
// os.Getenv), without Options. A partial or malformed set of variables is
// an error wrapping ErrEnvironment that names what is missing and how to
// fix it; no launcher at all is a world of one.
func ReadEnvironment(getenv func(string) string) (Environment, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := envReader{getenv: getenv}
	return e.read()
}

// envReader parses variables; its methods return errors naming them.
type envReader struct {
	getenv func(string) string
}

func (e envReader) get(name string) string { return strings.TrimSpace(e.getenv(name)) }

// first returns the first set variable of names and its value.
func (e envReader) first(names ...string) (string, string) {
	for _, n := range names {
		if v := e.get(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

func envErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrEnvironment, fmt.Sprintf(format, args...))
}

// intOf parses the integer variable name (already read as v).
func intOf(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, envErr("%s=%q is not an integer", name, v)
	}
	return n, nil
}

// pair reads a rank variable and a size variable of one launcher: both or
// neither must be set. ok is false when neither is.
func (e envReader) pair(who, rankVar, sizeVar string) (rank, size int, ok bool, err error) {
	rv, sv := e.get(rankVar), e.get(sizeVar)
	switch {
	case rv == "" && sv == "":
		return 0, 0, false, nil
	case sv == "":
		return 0, 0, false, envErr("%s is set but %s is not: %s sets both; set %s to the number of ranks (or unset %s for a world of one)", rankVar, sizeVar, who, sizeVar, rankVar)
	case rv == "":
		return 0, 0, false, envErr("%s is set but %s is not: %s sets both; set %s to this process's rank (or unset %s for a world of one)", sizeVar, rankVar, who, rankVar, sizeVar)
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
		return envErr("%s: world size %d, want >= 1", from, size)
	case rank < 0 || rank >= size:
		return envErr("%s: rank %d out of range for world size %d", from, rank, size)
	case localSize < 1 || localSize > size:
		return envErr("%s: local world size %d, want 1..%d (the world size)", from, localSize, size)
	case localRank < 0 || localRank >= localSize:
		return envErr("%s: local rank %d out of range for local world size %d", from, localRank, localSize)
	}
	return nil
}

func (e envReader) read() (Environment, error) {
	env := Environment{NodeRank: -1}
	var err error
	switch {
	case e.get(EnvRank) != "" || e.get(EnvWorldSize) != "" || e.get(EnvLocalRank) != "":
		env.Launcher = LauncherTorch
		err = e.readTorch(&env)
	case e.get(EnvOMPIRank) != "" || e.get(EnvOMPISize) != "":
		env.Launcher = LauncherOpenMPI
		err = e.readMPI(&env, "Open MPI's mpirun", EnvOMPIRank, EnvOMPISize, EnvOMPILocalRank, EnvOMPILocalSize)
	case e.get(EnvPMIRank) != "" || e.get(EnvPMISize) != "":
		env.Launcher = LauncherPMI
		err = e.readMPI(&env, "the PMI launcher (MPICH's mpiexec/Hydra)", EnvPMIRank, EnvPMISize, EnvPMILocalRank, EnvPMILocalRanks)
	case e.get(EnvSlurmProcID) != "" && e.slurmStep() != "":
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

func (e envReader) slurmStep() string {
	_, v := e.first(EnvSlurmStepID, "SLURM_STEPID")
	return v
}

// readTorch reads the torchrun/DeepSpeed/Kubeflow variables.
func (e envReader) readTorch(env *Environment) error {
	const who = "torchrun (and commrun, DeepSpeed, Kubeflow)"
	rank, size, ok, err := e.pair(who, EnvRank, EnvWorldSize)
	if err != nil {
		return err
	}
	if !ok {
		return envErr("%s=%s is set but %s and %s are not: a launcher that sets LOCAL_RANK must also set RANK and WORLD_SIZE (or unset LOCAL_RANK for a world of one)", EnvLocalRank, e.get(EnvLocalRank), EnvRank, EnvWorldSize)
	}
	env.Rank, env.Size = rank, size
	sizeVar, sv := e.first(EnvLocalWorldSize, "LOCAL_SIZE")
	lv := e.get(EnvLocalRank)
	switch {
	case lv != "" && sv != "":
		if env.LocalRank, err = intOf(EnvLocalRank, lv); err != nil {
			return err
		}
		if env.LocalSize, err = intOf(sizeVar, sv); err != nil {
			return err
		}
	case lv != "":
		return envErr("%s is set but %s is not: set it to the number of ranks on this host", EnvLocalRank, EnvLocalWorldSize)
	case sv != "":
		return envErr("%s is set but %s is not: set it to this process's rank among the ranks on this host", sizeVar, EnvLocalRank)
	default:
		// Kubeflow's PyTorchJob sets neither: one rank per pod. On
		// loopback every rank is on this host.
		if size == 1 || isLoopback(e.get(EnvMasterAddr)) {
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
func (e envReader) readMPI(env *Environment, who, rankVar, sizeVar, localRankVar, localSizeVar string) error {
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
		return envErr("%s=%d and %s=%d are set but %s and %s are not: %s sets them; set them to this rank's place among the ranks of its host", rankVar, rank, sizeVar, size, localRankVar, localSizeVar, who)
	}
	env.LocalRank, env.LocalSize = lr, ls
	return nil
}

// readSlurm reads the variables srun gives each task of a step.
func (e envReader) readSlurm(env *Environment) error {
	var err error
	if env.Rank, err = intOf(EnvSlurmProcID, e.get(EnvSlurmProcID)); err != nil {
		return err
	}
	name, v := e.first("SLURM_STEP_NUM_TASKS", EnvSlurmNTasks, "SLURM_NPROCS")
	if v == "" {
		return envErr("%s=%d is set but %s is not: srun sets it; set it to the number of tasks (ranks) of the step", EnvSlurmProcID, env.Rank, EnvSlurmNTasks)
	}
	if env.Size, err = intOf(name, v); err != nil {
		return err
	}
	lv := e.get(EnvSlurmLocalID)
	if lv == "" {
		return envErr("%s=%d is set but %s is not: srun sets it; set it to this task's index among the tasks of its node", EnvSlurmProcID, env.Rank, EnvSlurmLocalID)
	}
	if env.LocalRank, err = intOf(EnvSlurmLocalID, lv); err != nil {
		return err
	}
	if v := e.get(EnvSlurmNodeID); v != "" {
		if env.NodeRank, err = intOf(EnvSlurmNodeID, v); err != nil {
			return err
		}
	}
	env.LocalSize, err = e.slurmLocalSize(env)
	return err
}

// slurmLocalSize finds how many tasks of the step run on this node, from
// the tasks-per-node list ("2(x3),1") and this node's place in the step.
func (e envReader) slurmLocalSize(env *Environment) (int, error) {
	name, v := e.first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	if v == "" {
		if _, n := e.first("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"); n == "1" {
			return env.Size, nil
		}
		return 0, envErr("SLURM step of %d tasks but SLURM_STEP_TASKS_PER_NODE is not set: srun sets it; set it (e.g. 4(x2) for 4 tasks on each of 2 nodes) or set LOCAL_WORLD_SIZE with the torchrun variables", env.Size)
	}
	perNode, err := expandTasksPerNode(name, v)
	if err != nil {
		return 0, err
	}
	idx := -1
	if node := e.get("SLURMD_NODENAME"); node != "" {
		if _, list := e.first(EnvSlurmStepNodes, EnvSlurmNodeList, "SLURM_NODELIST"); list != "" {
			if hosts, err := expandHostlist(list); err == nil {
				for i, h := range hosts {
					if h == node {
						idx = i
						break
					}
				}
			}
		}
	}
	if idx < 0 {
		idx = env.NodeRank
	}
	if len(perNode) == 1 {
		idx = 0
	}
	if idx < 0 || idx >= len(perNode) {
		return 0, envErr("%s=%q lists %d nodes but this node's index (SLURMD_NODENAME in the node list, else SLURM_NODEID) is unknown or out of range: set SLURM_NODEID", name, v, len(perNode))
	}
	return perNode[idx], nil
}

// expandTasksPerNode expands SLURM's "2(x3),1" into [2 2 2 1].
func expandTasksPerNode(name, v string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(v, ",") {
		count, reps := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			count, reps = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil || c < 1 || r < 1 || r > maxHosts || len(out)+r > maxHosts {
			return nil, envErr("%s=%q: want a list such as 4(x2),3", name, v)
		}
		for range r {
			out = append(out, c)
		}
	}
	return out, nil
}

// rendezvous chooses the meeting place of a world of several ranks from the
// launcher's variables (GOCOMM_INIT_METHOD and Options come later, in
// resolve).
func (e envReader) rendezvous(env *Environment) (Rendezvous, error) {
	if init := e.get(EnvInitMethod); init != "" && init != "env://" {
		return parseInitMethod(init)
	}
	addr, port := e.get(EnvMasterAddr), e.get(EnvMasterPort)
	if addr != "" || port != "" {
		hp, err := masterHostPort(addr, port)
		if err != nil {
			return Rendezvous{}, err
		}
		r := Rendezvous{Kind: RendezvousTCP, Addr: hp, From: EnvMasterAddr + ":" + EnvMasterPort}
		if env.Launcher == LauncherTorch && strings.EqualFold(e.get(EnvUseAgentStore), "true") {
			attempt := e.get(EnvRestartCount)
			if attempt == "" {
				attempt = "0"
			}
			run := e.get(EnvRunID)
			if run == "" {
				run = "none"
			}
			r.Kind = RendezvousAgent
			r.Prefix = "gocomm/torchelastic/" + run + "/attempt_" + attempt
			r.From = "torchrun's agent store at " + EnvMasterAddr + ":" + EnvMasterPort + " (" + EnvUseAgentStore + "=True)"
		}
		return r, nil
	}
	if env.Launcher == LauncherTorch {
		return Rendezvous{}, envErr("world of %d ranks (%s=%d) but %s and %s are not set: set them to rank 0's host and a free port on it (torchrun and commrun set both)", env.Size, EnvWorldSize, env.Size, EnvMasterAddr, EnvMasterPort)
	}
	if env.LocalSize == env.Size && env.Launcher != LauncherSlurm {
		id, from := e.jobID(env.Launcher)
		name := "gocomm-" + env.Launcher.String() + "-" + sanitize(id) + ".store"
		return Rendezvous{Kind: RendezvousFile, Path: filepath.Join(os.TempDir(), name), From: "a file store in " + os.TempDir() + " named by " + from + " (every rank on one host)"}, nil
	}
	if r, ok, err := e.slurmRendezvous(env); ok || err != nil {
		return r, err
	}
	if (env.Launcher == LauncherOpenMPI || env.Launcher == LauncherPMI) && mpi.Available() {
		return Rendezvous{Kind: RendezvousMPI, From: "MPI: rank 0's address broadcast over MPI_COMM_WORLD (a -tags mpi build)"}, nil
	}
	init := EnvInitMethod + "=file:///shared/dir/job-<id>.store"
	hint := "mpirun -x MASTER_ADDR=<rank 0's host> -x MASTER_PORT=29500"
	if env.Launcher == LauncherPMI {
		hint = "mpiexec -genv MASTER_ADDR <rank 0's host> -genv MASTER_PORT 29500"
	}
	return Rendezvous{}, envErr("world of %d ranks on several hosts started by %s, but no meeting place: set %s and %s (%s), or %s on a shared file system, or build with -tags mpi to meet through MPI", env.Size, env.Launcher, EnvMasterAddr, EnvMasterPort, hint, init)
}

// masterHostPort validates MASTER_ADDR and MASTER_PORT.
func masterHostPort(addr, port string) (string, error) {
	switch {
	case addr == "":
		return "", envErr("%s=%s is set but %s is not: set it to the host of rank 0 (127.0.0.1 on one machine)", EnvMasterPort, port, EnvMasterAddr)
	case port == "":
		return "", envErr("%s=%s is set but %s is not: set it to a free TCP port on rank 0's host (e.g. 29500)", EnvMasterAddr, addr, EnvMasterPort)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", envErr("%s=%q is not a TCP port: set it to a free port (1-65535) rank 0 can listen on", EnvMasterPort, port)
	}
	return net.JoinHostPort(addr, strconv.Itoa(p)), nil
}

// jobID names an MPI job for its file store: the launcher's job id, else
// the ranks' common parent process (the launcher's proxy on this host).
func (e envReader) jobID(l Launcher) (id, from string) {
	if l == LauncherOpenMPI {
		if name, v := e.first("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid"); v != "" {
			return v, name
		}
	}
	if name, v := e.first("PMIX_NAMESPACE", "PMI_JOBID", EnvSlurmJobID); v != "" {
		if name == EnvSlurmJobID {
			v += "." + e.slurmStep()
		}
		return v, name
	}
	return parentID(), "the parent process (the launcher) id"
}

// parentID identifies the parent process: its pid and, where /proc has it,
// its start time, so that a recycled pid does not name an old job.
func parentID() string {
	ppid := os.Getppid()
	id := strconv.Itoa(ppid)
	if b, err := os.ReadFile("/proc/" + id + "/stat"); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 19 {
				id += "-" + f[19] // starttime, field 22 of proc(5)
			}
		}
	}
	return "ppid" + id
}

// sanitize keeps a job id usable in a file name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

// slurmRendezvous places the store on the first host of the SLURM node list
// with a port derived from the job and step ids. ok is false when the
// variables are not there.
func (e envReader) slurmRendezvous(env *Environment) (Rendezvous, bool, error) {
	listVar, list := e.first(EnvSlurmStepNodes, EnvSlurmNodeList, "SLURM_NODELIST")
	if env.Launcher != LauncherSlurm {
		// An MPI launcher inside an allocation: its step is the launcher's
		// daemons, its rank 0 is on the allocation's first node.
		listVar, list = e.first(EnvSlurmNodeList, "SLURM_NODELIST")
	}
	jobVar, job := e.first(EnvSlurmJobID, "SLURM_JOBID")
	if list == "" && env.Launcher != LauncherSlurm {
		return Rendezvous{}, false, nil
	}
	if list == "" {
		return Rendezvous{}, true, envErr("SLURM step of %d tasks but neither %s nor %s is set, and %s/%s are not either: set %s and %s to rank 0's host and a free port", env.Size, EnvSlurmStepNodes, EnvSlurmNodeList, EnvMasterAddr, EnvMasterPort, EnvMasterAddr, EnvMasterPort)
	}
	if job == "" {
		return Rendezvous{}, true, envErr("%s is set but %s is not, so no store port can be derived: set %s (or %s and %s)", listVar, EnvSlurmJobID, EnvSlurmJobID, EnvMasterAddr, EnvMasterPort)
	}
	hosts, err := expandHostlist(list)
	if err != nil {
		return Rendezvous{}, true, envErr("%s: %v: set %s and %s instead", listVar, err, EnvMasterAddr, EnvMasterPort)
	}
	jobN, err := strconv.ParseUint(job, 10, 64)
	if err != nil {
		return Rendezvous{}, true, envErr("%s=%q is not a job number: set %s and %s instead", jobVar, job, EnvMasterAddr, EnvMasterPort)
	}
	step, _ := strconv.ParseUint(e.slurmStep(), 10, 64)
	port := slurmPort(jobN, step)
	host := hosts[0]
	if env.Rank == 0 {
		if me := e.get("SLURMD_NODENAME"); me != "" && me != host {
			return Rendezvous{}, true, envErr("rank 0 runs on %s, not on %s, the first host of %s where the others will look for it: set %s to rank 0's host and %s to a free port", me, host, listVar, EnvMasterAddr, EnvMasterPort)
		}
	}
	return Rendezvous{
		Kind: RendezvousTCP,
		Addr: net.JoinHostPort(host, strconv.Itoa(port)),
		From: fmt.Sprintf("the first host of %s and a port derived from %s=%s", listVar, jobVar, job),
	}, true, nil
}

// slurmPort derives the store port of a SLURM job step: in [10000, 30000),
// below Linux's ephemeral range, distinct for 1250 consecutive job ids with
// up to 16 steps each.
func slurmPort(job, step uint64) int {
	return 10000 + int((job*16+step%16)%20000)
}

// maxHosts bounds a hostlist expansion: a malformed or hostile list must not
// exhaust memory.
const maxHosts = 1 << 20

// expandHostlist expands a SLURM hostlist expression such as
// "node[01-04,07],gpu-[1-2]-x[a,b]" into host names, in order, keeping
// zero padding ("node01").
func expandHostlist(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	flush := func(end int) error {
		item := strings.TrimSpace(s[start:end])
		if item == "" {
			return nil
		}
		hosts, err := expandHostItem(item, maxHosts-len(out))
		if err != nil {
			return err
		}
		out = append(out, hosts...)
		return nil
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("hostlist %q: nested '['", s)
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("hostlist %q: ']' without '['", s)
			}
		case ',':
			if depth == 0 {
				if err := flush(i); err != nil {
					return nil, err
				}
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %q: '[' without ']'", s)
	}
	if err := flush(len(s)); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostlist %q names no host", s)
	}
	return out, nil
}

// expandHostItem expands one comma-free (outside brackets) item: literal
// text and bracketed range lists, in a cartesian product.
func expandHostItem(item string, limit int) ([]string, error) {
	out := []string{""}
	for item != "" {
		i := strings.IndexByte(item, '[')
		if i < 0 {
			for k := range out {
				out[k] += item
			}
			break
		}
		j := strings.IndexByte(item, ']')
		prefix, ranges := item[:i], item[i+1:j]
		item = item[j+1:]
		alts, err := expandRanges(ranges, limit)
		if err != nil {
			return nil, err
		}
		if len(out)*len(alts) > limit {
			return nil, fmt.Errorf("hostlist expands to more than %d hosts", maxHosts)
		}
		next := make([]string, 0, len(out)*len(alts))
		for _, o := range out {
			for _, a := range alts {
				next = append(next, o+prefix+a)
			}
		}
		out = next
	}
	return out, nil
}

// expandRanges expands "01-04,07" into 01 02 03 04 07.
func expandRanges(s string, limit int) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		if !isDigits(lo) || !isDigits(hi) {
			return nil, fmt.Errorf("hostlist range %q: want numbers such as 01-04", part)
		}
		a, err1 := strconv.ParseUint(lo, 10, 64)
		b, err2 := strconv.ParseUint(hi, 10, 64)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("hostlist range %q: want low-high with low <= high", part)
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("hostlist expands to more than %d hosts", maxHosts)
		}
		width := len(lo)
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// config is Options with every default and environment variable applied.
type config struct {
	launcher             Launcher
	rank, size           int
	localRank, localSize int
	nodeRank             int
	rdzv                 Rendezvous
	backend              string
	timeout              time.Duration
	secret               []byte
	listenHost           string
	socketIfname         string
	// storeLocal is this rank's address on its connection to the store
	// Init opened, if that is a TCP store.
	storeLocal net.Addr
	algorithms backend.Algorithms
	logger     *slog.Logger
	// profile is GOCOMM_PROFILE, for the comms logger.
	profile string
	// profiling is the comms logger's configuration (profile.go).
	profiling *profile.Config
	// ownBootstrap: the backend meets without a store (MPI).
	ownBootstrap bool
	transport    backend.TransportConfig
	// transportMode is Options.Transport, before resolveKnobs parses it
	// (or GOCOMM_TRANSPORT) into transport.Mode.
	transportMode string
}

// resolve applies the environment to opts.
func resolve(opts Options) (config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	e := envReader{getenv: getenv}
	cfg := config{
		rank: opts.Rank, size: opts.Size,
		localRank: opts.LocalRank, localSize: opts.LocalSize,
		nodeRank: -1,
		backend:  opts.Backend, timeout: opts.Timeout, secret: opts.Secret,
		listenHost: opts.ListenHost, socketIfname: opts.SocketIfname, algorithms: opts.Algorithms, logger: opts.Logger,
		transport:     backend.TransportConfig{HostID: opts.HostID, SingleCopyBytes: opts.SingleCopyBytes},
		transportMode: opts.Transport,
	}
	if cfg.size == 0 {
		env, err := e.read()
		if err != nil {
			return cfg, err
		}
		cfg.launcher, cfg.rank, cfg.size, cfg.nodeRank, cfg.rdzv = env.Launcher, env.Rank, env.Size, env.NodeRank, env.Rendezvous
		if cfg.localSize == 0 {
			cfg.localRank, cfg.localSize = env.LocalRank, env.LocalSize
		}
	}
	if cfg.size < 1 {
		return cfg, envErr("world size %d, want >= 1", cfg.size)
	}
	if cfg.rank < 0 || cfg.rank >= cfg.size {
		return cfg, envErr("rank %d out of range for world size %d", cfg.rank, cfg.size)
	}
	if cfg.localSize == 0 {
		cfg.localRank, cfg.localSize = cfg.rank, cfg.size
	}
	if err := e.resolveKnobs(&cfg); err != nil {
		return cfg, err
	}
	if d, ok := backend.Lookup(cfg.backend); ok {
		if sb, ok := d.(backend.SelfBootstrapping); ok && sb.OwnBootstrap() {
			cfg.ownBootstrap = true
		}
	}
	if !cfg.ownBootstrap {
		if err := e.resolveRendezvous(&cfg, opts); err != nil {
			return cfg, err
		}
	}
	// The comms logger (profile.go): Options.Profile, else GOCOMM_PROFILE,
	// GOCOMM_PROFILE_* and GOCOMM_TRACE_DIR, read by profile.FromEnv.
	prof, err := profileConfig(opts.Profile, e.get)
	if err != nil {
		return cfg, err
	}
	cfg.profiling = prof
	return cfg, nil
}

// resolveRendezvous applies Options and GOCOMM_INIT_METHOD to the meeting
// place and checks that a world of several ranks has one.
func (e envReader) resolveRendezvous(cfg *config, opts Options) error {
	if cfg.size == 1 || opts.Store != nil {
		cfg.rdzv = Rendezvous{}
		return nil
	}
	if opts.MasterAddr != "" || opts.MasterPort != 0 {
		host, port := opts.MasterAddr, opts.MasterPort
		if h, p, err := net.SplitHostPort(cfg.rdzv.Addr); err == nil && cfg.rdzv.Kind != RendezvousFile {
			if host == "" {
				host = h
			}
			if port == 0 {
				port, _ = strconv.Atoi(p)
			}
		}
		if host == "" {
			host = e.get(EnvMasterAddr)
		}
		if port == 0 && e.get(EnvMasterPort) != "" {
			var err error
			if port, err = intOf(EnvMasterPort, e.get(EnvMasterPort)); err != nil {
				return err
			}
		}
		switch {
		case host == "":
			return envErr("Options.MasterPort is set but not the master's host: set Options.MasterAddr or %s to the host of rank 0", EnvMasterAddr)
		case port <= 0 || port > 65535:
			return envErr("Options.MasterAddr is set but master port %d is not a TCP port: set Options.MasterPort or %s to a free port rank 0 can listen on", port, EnvMasterPort)
		}
		kind := RendezvousTCP
		if cfg.rdzv.Kind == RendezvousAgent {
			kind = RendezvousAgent
		}
		cfg.rdzv = Rendezvous{Kind: kind, Addr: net.JoinHostPort(host, strconv.Itoa(port)), Prefix: cfg.rdzv.Prefix, From: "Options.MasterAddr/MasterPort"}
		return nil
	}
	if cfg.rdzv.Kind != RendezvousNone {
		return nil // from the launcher's variables
	}
	// Explicit Rank/Size in Options: the meeting place comes from
	// GOCOMM_INIT_METHOD, else MASTER_ADDR and MASTER_PORT.
	if init := e.get(EnvInitMethod); init != "" && init != "env://" {
		r, err := parseInitMethod(init)
		if err != nil {
			return err
		}
		cfg.rdzv = r
		return nil
	}
	addr, port := e.get(EnvMasterAddr), e.get(EnvMasterPort)
	if addr == "" && port == "" {
		return envErr("world of %d ranks but no rendezvous: set %s and %s (or Options.MasterAddr/MasterPort, or Options.Store, or %s)", cfg.size, EnvMasterAddr, EnvMasterPort, EnvInitMethod)
	}
	hp, err := masterHostPort(addr, port)
	if err != nil {
		return err
	}
	cfg.rdzv = Rendezvous{Kind: RendezvousTCP, Addr: hp, From: EnvMasterAddr + ":" + EnvMasterPort}
	return nil
}

// parseInitMethod reads GOCOMM_INIT_METHOD: tcp://host:port or
// file:///path (torch's init_method URLs).
func parseInitMethod(s string) (Rendezvous, error) {
	u, err := url.Parse(s)
	if err == nil {
		switch u.Scheme {
		case "tcp":
			if u.Hostname() != "" && u.Port() != "" {
				if _, err := masterHostPort(u.Hostname(), u.Port()); err == nil {
					return Rendezvous{Kind: RendezvousTCP, Addr: u.Host, From: EnvInitMethod}, nil
				}
			}
		case "file":
			if u.Path != "" && u.Host == "" {
				return Rendezvous{Kind: RendezvousFile, Path: u.Path, From: EnvInitMethod}, nil
			}
		}
	}
	return Rendezvous{}, envErr("%s=%q: want env://, tcp://host:port (rank 0 hosts the store) or file:///absolute/path (a file every rank can reach)", EnvInitMethod, s)
}

// resolveKnobs applies the GOCOMM_* knobs Options left unset.
func (e envReader) resolveKnobs(cfg *config) error {
	if cfg.backend == "" {
		cfg.backend = e.get(EnvBackend)
	}
	if cfg.backend == "" {
		cfg.backend = "native"
	}
	if cfg.timeout == 0 {
		if v := e.get(EnvTimeout); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				secs, err2 := strconv.ParseFloat(v, 64)
				if err2 != nil {
					return envErr("%s=%q: want a duration such as 90s or 30m", EnvTimeout, v)
				}
				d = time.Duration(secs * float64(time.Second))
			}
			cfg.timeout = d
		} else if v := e.get(EnvDeepSpeedTimeout); v != "" {
			mins, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return envErr("%s=%q: want minutes, such as 30", EnvDeepSpeedTimeout, v)
			}
			cfg.timeout = time.Duration(mins * float64(time.Minute))
		}
	}
	if cfg.timeout <= 0 {
		cfg.timeout = DefaultTimeout
	}
	if cfg.secret == nil {
		if v := e.getenv(EnvSecret); v != "" {
			cfg.secret = []byte(v)
		}
	}
	if cfg.listenHost == "" {
		cfg.listenHost = e.get(EnvSocketHost)
	}
	if cfg.socketIfname == "" {
		cfg.socketIfname = cmp.Or(e.get(EnvSocketIfname), e.get(EnvGlooIfname))
	}
	// The transport mode is parsed here, once: the backend gets the value.
	if mode, from := cfg.transportMode, "Options.Transport"; true {
		if mode == "" {
			mode, from = e.get(EnvTransport), EnvTransport
		}
		m, err := core.ParseTransportMode(mode)
		if err != nil {
			return envErr("%s=%q: %v", from, mode, err)
		}
		cfg.transport.Mode = m
	}
	if cfg.transport.HostID == "" {
		cfg.transport.HostID = e.get(EnvHostID)
	}
	if v := e.get(EnvSingleCopy); v != "" && cfg.transport.SingleCopyBytes == 0 {
		n, err := strconv.Atoi(v)
		switch {
		case v == "off" || v == "0":
			n = -1
		case err != nil || n < 0:
			return envErr("%s=%q: want a message size in bytes (e.g. 262144) or off", EnvSingleCopy, v)
		}
		cfg.transport.SingleCopyBytes = n
	}
	overrides := []struct {
		name string
		dst  *algo.Algorithm
	}{
		{"ALLREDUCE", &cfg.algorithms.AllReduce}, {"REDUCE", &cfg.algorithms.Reduce},
		{"BROADCAST", &cfg.algorithms.Broadcast}, {"ALLGATHER", &cfg.algorithms.AllGather},
		{"REDUCESCATTER", &cfg.algorithms.ReduceScatter}, {"GATHER", &cfg.algorithms.Gather},
		{"SCATTER", &cfg.algorithms.Scatter}, {"ALLTOALL", &cfg.algorithms.AllToAll},
		{"BARRIER", &cfg.algorithms.Barrier},
	}
	for _, o := range overrides {
		if *o.dst != algo.Auto {
			continue
		}
		if v := e.get(EnvAlgoPrefix + o.name); v != "" {
			a, err := algorithmOf(v)
			if err != nil {
				return fmt.Errorf("%w: %s%s: %w", ErrEnvironment, EnvAlgoPrefix, o.name, err)
			}
			*o.dst = a
		}
	}
	if cfg.logger == nil {
		if v := e.get(EnvDebug); v != "" {
			level, on, err := debugLevel(v)
			if err != nil {
				return err
			}
			if on {
				h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
				cfg.logger = slog.New(h).With("rank", cfg.rank)
			}
		}
	}
	cfg.profile = e.get(EnvProfile)
	return nil
}

// debugLevel reads GOCOMM_DEBUG.
func debugLevel(v string) (slog.Level, bool, error) {
	switch strings.ToLower(v) {
	case "0", "false", "off", "no":
		return 0, false, nil
	case "1", "true", "on", "yes", "debug", "detail":
		return slog.LevelDebug, true, nil
	case "info":
		return slog.LevelInfo, true, nil
	case "warn", "warning":
		return slog.LevelWarn, true, nil
	case "error":
		return slog.LevelError, true, nil
	}
	return 0, false, envErr("%s=%q: want 1 (debug), info, warn, error or 0 (off)", EnvDebug, v)
}

// openStore opens the meeting place Init needs when Options.Store is nil
// and the world has several ranks. The returned store's Close releases
// everything it opened (and, for a file store, removes the file once every
// rank has closed it).
func (cfg *config) openStore(ctx context.Context) (rendezvous.Store, error) {
	r := cfg.rdzv
	fail := func(err error) error {
		return fmt.Errorf("comm: rank %d: rendezvous (%v store at %s, from %s): %w", cfg.rank, r.Kind, r.Addr+r.Path, r.From, err)
	}
	var st rendezvous.Store
	var closers []func() error
	if r.Kind == RendezvousMPI {
		// Every rank learns where rank 0's store will be; from here on
		// it is a TCP rendezvous.
		info, err := mpi.Bootstrap(ctx, cfg.listenHost)
		if err != nil {
			return nil, fail(err)
		}
		if info.Rank != cfg.rank || info.Size != cfg.size {
			return nil, fail(fmt.Errorf("MPI says rank %d of %d, the environment rank %d of %d", info.Rank, info.Size, cfg.rank, cfg.size))
		}
		r.Kind, r.Addr = RendezvousTCP, net.JoinHostPort(info.MasterAddr, strconv.Itoa(info.MasterPort))
	}
	switch r.Kind {
	case RendezvousTCP:
		addr := r.Addr
		if cfg.rank == 0 {
			// Listen on every interface unless the master is a loopback
			// address: a host name may resolve to 127.0.1.1 (Debian) on
			// its own host while the others reach it on another address.
			host, port, _ := net.SplitHostPort(addr)
			if !isLoopback(host) {
				addr = net.JoinHostPort("", port)
			}
		}
		tcp, err := rendezvous.NewTCPStore(ctx, addr, cfg.rank == 0)
		if err != nil {
			return nil, fail(err)
		}
		st = tcp
		cfg.storeLocal = tcp.LocalAddr()
	case RendezvousAgent:
		tcp, err := rendezvous.DialTCPStore(ctx, r.Addr)
		if err != nil {
			return nil, fail(err)
		}
		st = tcp
		cfg.storeLocal = tcp.LocalAddr()
	case RendezvousFile:
		fs, err := rendezvous.NewFileStore(r.Path)
		if err != nil {
			return nil, fail(err)
		}
		st = fs
		size, path := int64(cfg.size), r.Path
		closers = append(closers, func() error {
			// The last rank to close removes the file, so that a later
			// job with the same id cannot read this one's keys.
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := fs.Add(cctx, "gocomm/closed", 1)
			if err == nil && n == size {
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		})
	default:
		return nil, fail(envErr("no meeting place for a world of %d ranks: set %s and %s", cfg.size, EnvMasterAddr, EnvMasterPort))
	}
	closers = append(closers, st.Close)
	if r.Prefix != "" {
		st = rendezvous.NewPrefixStore(r.Prefix, st)
		closers = append([]func() error{st.Close}, closers...)
	}
	if cfg.logger != nil {
		cfg.logger.Debug("comm: rendezvous", "launcher", cfg.launcher, "kind", r.Kind, "at", r.Addr+r.Path, "prefix", r.Prefix, "from", r.From)
	}
	return &jobStore{Store: st, closers: closers}, nil
}

// jobStore is the store Init opened; Close releases every layer of it.
type jobStore struct {
	rendezvous.Store
	closers []func() error
	once    sync.Once
	err     error
}

func (s *jobStore) Close() error {
	s.once.Do(func() {
		var errs []error
		for _, c := range s.closers {
			errs = append(errs, c())
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}
