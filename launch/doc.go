// Package launch starts the ranks of a gocomm job on this host: the logic
// of cmd/commrun and of Spawn, the self-launch helper.
//
// Run starts Config.NProcs copies of a program with the environment
// contract of package comm (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), prefixes every
// line they print with "[rank] ", forwards the signals it is given, and
// waits. When a rank fails (non-zero exit or a signal) it stops the others
// (SIGTERM, then SIGKILL after Config.KillGrace) and returns a *JobError
// whose message names the rank, its exit status or signal and its last
// lines of output. Config.Timeout bounds the whole job.
//
// On several hosts, Run is started once per host (by a scheduler, ssh, or
// a Kubernetes pod per node), each with the same NNodes, MasterAddr and
// MasterPort and its own NodeRank, as torchrun is: global ranks are
// NodeRank*NProcs + local rank (with NProcsPerNode, the ranks of the hosts
// before it + local rank).
//
// With Config.Elastic (commrun --elastic MIN:MAX), a failed rank does not
// stop the job: its process is started again, up to MaxRestarts times, with
// GOCOMM_JOIN=1, which makes comm.Init join the running world (comm.Join)
// when the survivors, having shrunk past the failure, call Comm.Grow; once no
// restart is left the job runs on while at least MIN ranks remain.
//
// Spawn makes a program its own launcher, like torch.multiprocessing.spawn:
//
//	func main() {
//		parent, err := launch.Spawn(ctx, 4)
//		if parent { // the 4 ranks ran and have exited
//			if err != nil { log.Fatal(err) }
//			return
//		}
//		c, err := comm.Init(ctx, comm.Options{}) // a rank: the environment says which
//		...
//	}
//
// Under any launcher (commrun, torchrun, mpirun, srun) Spawn returns false
// at once, so the same binary runs unchanged everywhere.
//
// Main is commrun's command line.
//
// Processes are started in their own process group (on Unix), so a
// terminal's Ctrl-C reaches the launcher only, which forwards it once to
// every rank's group; a rank's own children are stopped with it.
package launch
