// Package env is gocomm's environment contract: the variables a launcher
// sets to describe a world (torchrun's, MPI's, SLURM's, and gocomm's own
// GOCOMM_* knobs), the detection of the launcher family, and the choice of
// the meeting place (rendezvous) of a world of several ranks. The launchers
// in package launch (commrun, Spawn) write these variables and comm.Init
// reads them; both use this package, so the names live in one place.
//
// The package only reads variables through a getenv function and parses
// them: it imports nothing of gocomm, opens no connection and keeps no
// state, so any package may import it. This doc is the reference for the
// launchers' variables; gocomm's own GOCOMM_* knobs are listed, with their
// defaults and when to change them, in docs/tuning.md in the module's
// source (their names are the Env* constants here).
//
// Which launcher describes the world, first match wins (comm.Options, when
// set, win over all of them, in comm.Init):
//
//  1. torchrun, DeepSpeed, Kubeflow PyTorchJob, commrun, Spawn: RANK,
//     WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (DeepSpeed: LOCAL_SIZE),
//     GROUP_RANK (DeepSpeed: CROSS_RANK), MASTER_ADDR, MASTER_PORT,
//     TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_RUN_ID,
//     TORCHELASTIC_RESTART_COUNT.
//  2. Open MPI (mpirun, mpiexec, orterun, prterun): OMPI_COMM_WORLD_RANK,
//     OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
//     OMPI_COMM_WORLD_LOCAL_SIZE.
//  3. MPICH, Hydra, Intel MPI and other PMI launchers: PMI_RANK, PMI_SIZE,
//     MPI_LOCALRANKID, MPI_LOCALNRANKS.
//  4. SLURM srun (a job step): SLURM_PROCID, SLURM_STEP_NUM_TASKS or
//     SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE, SLURM_NODEID,
//     SLURM_STEP_NODELIST or SLURM_JOB_NODELIST, SLURM_JOB_ID.
//  5. Nothing: a world of one.
//
// The meeting place of a world of several ranks, first match wins (after
// comm.Options.Store and Options.MasterAddr/MasterPort, in comm.Init):
// GOCOMM_INIT_METHOD (tcp://host:port, file:///path, or
// etcd://host:port[,host:port...]/job-prefix: an etcd cluster that no rank
// hosts, see ParseInitMethod); MASTER_ADDR and
// MASTER_PORT (under torchrun with TORCHELASTIC_USE_AGENT_STORE=True every
// rank, rank 0 included, joins the store torchrun's agent already hosts
// there); for MPI launchers with every rank on one host, a file store in
// os.TempDir() named by the job's id; for SLURM (and MPI launchers inside
// a SLURM allocation), rank 0 hosts the TCP store on the first host of the
// node list, on a port derived from SLURM_JOB_ID and SLURM_STEP_ID; for MPI
// launchers on several hosts in a program that can meet through MPI
// (Reader.MPIBootstrap), rank 0 hosts it on a free port whose address MPI
// broadcasts. Anything else is an error wrapping ErrEnvironment that says
// which variables to set.
package env
