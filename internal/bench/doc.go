// Package bench is the logic of commbench, gocomm's collective benchmark
// after nccl-tests and DeepSpeed's communication benchmarks, and of its
// comparison mode against Open MPI and torch.distributed's gloo.
//
// The pieces, each usable alone:
//
//   - Ops and formulas: Op, LayoutOf (the buffers of a case, with S the
//     full buffer as nccl-tests defines it), Op.BusFactor and
//     Op.Bandwidths (algbw = S/t, busbw = algbw times nccl-tests' factor).
//   - Sweeps and plans: ParseSize, Sweep, BuildPlan turn -b/-e/-f and the
//     op list into a Plan of Cases; WritePlan and ParsePlan are the text
//     form the peer harnesses read.
//   - Timing: Run runs a Plan on a *comm.Comm. Every rank calls it with the
//     same plan; the timed loop's duration per iteration is combined across
//     ranks (the slowest rank's) into the reported time, as nccl-tests and
//     OSU do; each iteration is also timed alone (min, median, max, each
//     the slowest rank's). With Plan.Check every case is run once more on
//     known inputs and every element verified.
//   - Results: Summarize turns a Sample into a Result row (mean, min,
//     median, max, algbw, busbw, #wrong); WriteRaw and ParseRaw are the raw
//     text form every runner (ours and the harnesses) writes; TableWriter,
//     WriteJSON, WriteCSV and WritePlot (SVG, busbw against size on a log2
//     axis, one line per series) are the outputs.
//   - Comparison: CompareWith runs one plan through several Runners, run
//     after run in a rotating order, and Aggregate takes per case the
//     median of the runs' means; WriteComparison prints the ratios
//     ours/peer (each gocomm series over the peers of its link, shared
//     memory or TCP, and over gloo). The harnesses are peers/mpi_bench.c
//     (compiled with mpicc at run time, run under mpirun with the vader or
//     the tcp BTL) and peers/gloo_bench.py (run with /usr/bin/python3, one
//     process per rank). The best-of series (mpi-shm-best, mpi-tcp-best)
//     run the MPI harness once per Open MPI tuned algorithm K, forced with
//     coll_tuned_<op>_algorithm (the list from ompi_info, else Open MPI
//     4.1's), as Runners with BestOf set, and keep per case the fastest
//     variant, naming it (Result.Algo).
//   - Data-parallel steps: commbench ddp (DDPMain) times one training
//     step's gradient averaging for the gradient lists of package
//     internal/models (ResNet-50, BERT-base, 1,000 small tensors): per
//     tensor, through ddp.Reducer, as one flat all-reduce (RunDDP, on a
//     *comm.Comm), and torch's DistributedDataParallel on gloo through
//     peers/ddp_bench.py (its step with DDP minus the same step under
//     no_sync); DDPCompare interleaves the series run after run and
//     AggregateDDP and WriteDDPReport print the medians, the same-run
//     ratios and the targets. Its overlap mode simulates the
//     backward per layer and reports the communication left exposed.
//
// Main, CompareMain and DDPMain are the command lines of cmd/commbench.
// Without a launcher, commbench starts its ranks with launch.Spawn; under
// commrun, torchrun or mpirun it joins their world through comm.Init.
//
// Benchmarks are never timed tests: the tests of this package check
// formulas, formats and correctness, not speed.
package bench
