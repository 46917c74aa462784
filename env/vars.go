package env

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
	EnvBackend = "GOCOMM_BACKEND"
	EnvTimeout = "GOCOMM_TIMEOUT"
	// EnvInitTimeout bounds Init alone (the rendezvous and the
	// connections), when it differs from the operations' GOCOMM_TIMEOUT.
	EnvInitTimeout = "GOCOMM_INIT_TIMEOUT"
	EnvAlgoPrefix  = "GOCOMM_ALGO_" // + ALLREDUCE, BROADCAST, ...
	EnvSecret      = "GOCOMM_SECRET"
	// EnvStoreAuth: 0 lets torch ranks share a store rank 0 hosts
	// although GOCOMM_SECRET is set (they cannot authenticate).
	EnvStoreAuth  = "GOCOMM_STORE_AUTH"
	EnvSocketHost = "GOCOMM_SOCKET_HOST"
	// EnvSocketIfname chooses the data connections' address by interface
	// name; GLOO_SOCKET_IFNAME is read when it is unset.
	EnvSocketIfname  = "GOCOMM_SOCKET_IFNAME"
	EnvGlooIfname    = "GLOO_SOCKET_IFNAME"
	EnvTransport     = "GOCOMM_TRANSPORT" // auto, tcp or shm
	EnvHostID        = "GOCOMM_HOST_ID"   // replaces the detected host identity
	EnvSingleCopy    = "GOCOMM_SHM_SINGLE_COPY"
	EnvSHMStores     = "GOCOMM_SHM_STORES"     // auto, cached or bypass
	EnvTCPCongestion = "GOCOMM_TCP_CONGESTION" // auto, system, or reno, cubic, bbr...
	EnvBind          = "GOCOMM_BIND"           // none, auto or a CPU list (package internal/cpubind)
	// EnvSettle is how long Init keeps a rank busy once set up (a
	// duration, or 0), so that its first operations run after the Go
	// runtime's monitor has slowed down; the default is the backend's.
	EnvSettle = "GOCOMM_SETTLE"
	// EnvJoin=1 makes comm.Init join a running world as a newcomer
	// (comm.Join) instead of starting one: commrun --elastic sets it for
	// the processes it starts to replace failed ranks.
	EnvJoin       = "GOCOMM_JOIN"
	EnvInitMethod = "GOCOMM_INIT_METHOD"
	EnvDebug      = "GOCOMM_DEBUG"
	EnvProfile    = "GOCOMM_PROFILE"
	// EnvDebugAddr: "host:port" of the flight recorders' JSON over HTTP.
	EnvDebugAddr = "GOCOMM_DEBUG_ADDR"
	// EnvFlightRecorderSignal: dump the flight recorders on SIGUSR1, to
	// stderr ("1") or into a directory.
	EnvFlightRecorderSignal = "GOCOMM_FLIGHT_RECORDER_SIGNAL"
	// DEEPSPEED_TIMEOUT (minutes) is honoured when GOCOMM_TIMEOUT is unset.
	EnvDeepSpeedTimeout = "DEEPSPEED_TIMEOUT"

	// EnvTorchStore forces the generation of PyTorch's TCPStore protocol
	// the store client speaks: 1 (torch 1.x, no handshake) or 2 (torch 2.x
	// with the VALIDATE handshake); unset or auto probes the server
	// (package rendezvous).
	EnvTorchStore = "GOCOMM_TORCH_STORE"
)

// TorchVars returns the variables of the torchrun family (torchrun,
// DeepSpeed, Kubeflow, commrun, Spawn): those Read takes the world from and
// those torchrun and DeepSpeed set besides. A launcher that starts ranks
// replaces all of them, so that an enclosing launcher's stale values are
// not misread. The slice is new on every call; the caller owns it.
func TorchVars() []string {
	return []string{
		EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize,
		EnvGroupRank, EnvGroupWorldSize, EnvMasterAddr, EnvMasterPort,
		EnvUseAgentStore, EnvRestartCount, EnvRunID,
		"LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE", // DeepSpeed's names
		"ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_ERROR_FILE",
	}
}
