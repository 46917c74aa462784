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
// -shrink and -optim onebitadam use the whole-gradient all-reduce (the
// Reducer is bound to its communicator, which -shrink replaces; 1-bit
// Adam reduces the momentum, not the gradient).
//
// With -shrink (and -optim sgd) the training survives the loss of ranks:
// when a collective fails, the ranks still alive shrink the world past the
// failed ones (comm.Comm.Shrink, as MPI ULFM's MPI_Comm_shrink), take the
// new rank 0's parameters, momentum and place in the training, and go on.
// Tell the launcher not to stop the job when a rank dies:
//
//	commrun -n 4 -keep-going -- ./train -shrink
//
// (rank 0 hosts the store the survivors agree through, so the job cannot
// survive rank 0 itself.)
//
// The comms logger takes its configuration from GOCOMM_PROFILE (and the
// other GOCOMM_PROFILE_* variables) when they are set, a DeepSpeed
// comms_logger block for instance; -profile and -trace-dir, when given,
// override them:
//
//	GOCOMM_PROFILE='{"enabled": true, "prof_all": false, "prof_ops": ["all_reduce"]}' go run ./examples/train
//
// Who may import it: nobody (a program). It uses the public package comm,
// packages ddp, optim and launch (to start its own ranks), as a user's
// program would.
package main
