// Command train is data-parallel training with gocomm: a multi-layer
// perceptron (two hidden layers of 512 tanh units: 273,412 parameters, a
// gradient of 1.04 MiB) learns a synthetic classification problem that
// every rank generates deterministically, each rank on its shard, with the
// gradients averaged over the ranks every step.
//
// The gradients go through a ddp.Reducer (torch DDP's reducer): backward
// writes each layer's weight and bias gradients into bucket memory and
// marks them ready as soon as the layer is done, so a full bucket is
// all-reduced while backward works on the layers below. -bucket-kb sets
// the bucket cap (256 KiB, so that the 1 MiB middle layer is a bucket of
// its own; DDP's 25 MiB would put the whole gradient in one bucket,
// started at the end). -overlap=false holds every bucket back until
// backward has finished, and -reducer=false all-reduces the gradient as
// one slice after backward, the way this program did before the Reducer;
// rank 0 prints the mean time of a step, so the three can be compared
// (examples/train/slowlink.sh does, between two simulated hosts over
// shaped links):
//
//	go run ./examples/train -optim adam
//	go run ./examples/train -optim adam -overlap=false
//	go run ./examples/train -optim adam -reducer=false
//
// -zero 1 or 2 trains with ZeRO (optim.Zero, Adam): each rank keeps the
// optimizer state of 1/N of every bucket, updates only those parameters,
// and all-gathers the rest; stage 1 all-reduces the gradients, stage 2
// reduce-scatters them. The result is Adam's up to rounding, every rank
// identical:
//
//	go run ./examples/train -zero 2
//
// -optim picks the optimizer: sgd (the default, momentum 0.9), adam, or
// onebitadam, DeepSpeed's 1-bit Adam (package optim): -freeze-step steps of
// exact Adam, then the momentum averaged by the 1-bit compressed
// all-reduce. With the profiler on (the default) rank 0 prints the bytes
// each stage sent per step, from the comms logger's records:
//
//	go run ./examples/train -optim adam
//	go run ./examples/train -optim onebitadam -freeze-step 40
//
// Run it as is and it starts 4 ranks of itself on this host (TCP store on
// 127.0.0.1, native backend):
//
//	go run ./examples/train
//
// The same binary runs unchanged under a launcher, which then decides the
// number of ranks:
//
//	go build -o train ./examples/train
//	commrun -n 4 -- ./train
//	mpirun -np 4 ./train
//	torchrun --nproc_per_node 2 --no_python ./train
//
// Rank 0 prints a line per epoch (loss, accuracy, samples/s), checks that
// every rank ends with the same parameters, prints a table of the time spent
// in collectives and a final line with a checksum of the parameters, equal
// for runs with the same world size and flags under any launcher.
//
// -optim onebitadam uses the whole-gradient all-reduce (1-bit Adam reduces
// the momentum, not the gradient).
//
// With -elastic (and -optim sgd) the training survives the loss of any rank
// and grows back when the launcher replaces it (package elastic): the
// parameters, the momentum and the step are an elastic.State; when a rank
// dies the others roll back to the last step, shrink the world
// (comm.Comm.Shrink) and go on; commrun --elastic restarts the dead rank's
// process, whose comm.Init joins (GOCOMM_JOIN=1), and at the next step the
// world grows (comm.Comm.Grow), the newcomer takes the survivors' state and
// the ddp.Reducer is rebuilt over the new world. A step is a fixed global
// batch (-batch times the job's world size) that the ranks of the moment
// share, so a run that changed size trains on the same samples in the same
// order as an undisturbed one (which ends with the plain training's bits).
// With the TCP store rank 0 hosts the store, so the job survives any rank
// but rank 0; keep the store in etcd and it survives rank 0 too:
//
//	commrun -n 4 --elastic 2:4 --max-restarts 3 -- ./train -elastic
//	GOCOMM_INIT_METHOD=etcd://127.0.0.1:2379/job-1 commrun -n 4 --elastic 2:4 --max-restarts 3 -- ./train -elastic
//
// Rank 0 prints a timestamped line when the world changes and when it
// steps again after a change (-log-steps: one per step). At the end, a
// world smaller than the job's waits up to -join-wait for replacements
// before it evaluates. -shrink is -elastic that waits for none, for
// commrun -keep-going: the survivors finish on their own. The recovery
// times, against torchrun's, are in docs/performance.md ("Elastic
// recovery"), measured by examples/train/trials.
//
// The comms logger takes its configuration from GOCOMM_PROFILE (and the
// other GOCOMM_PROFILE_* variables) when they are set, a DeepSpeed
// comms_logger block for instance; -profile and -trace-dir, when given,
// override them:
//
//	GOCOMM_PROFILE='{"enabled": true, "prof_all": false, "prof_ops": ["all_reduce"]}' go run ./examples/train
//
// Who may import it: nobody (a program). It uses the public package comm,
// packages ddp, optim, elastic and launch (to start its own ranks), as a
// user's program would.
package main
