// Package optim holds optimizers for data-parallel training over gocomm:
// Adam; 1-bit Adam as DeepSpeed's OnebitAdam
// (deepspeed/runtime/fp16/onebit/adam.py), whose compression stage
// all-reduces the momentum with the error-compensated 1-bit all-reduce of
// package onebit, cutting the bytes sent per step about 20-30 times; and
// Zero, Adam with its state partitioned across the ranks as DeepSpeed's
// ZeRO stages 1 and 2.
//
// All work on float32 parameter tensors the caller owns (one []float32
// each), given once at construction and updated in place by every Step.
// Arithmetic is element-wise float32 as torch computes it, with products
// rounded explicitly so that no architecture fuses them into FMAs: the same
// inputs give the same bits everywhere.
//
// # Adam
//
// Adam is local: average the gradients yourself, then step.
//
//	a, err := optim.NewAdam(optim.Config{LR: 1e-3}, params)
//	...
//	comm.AllReduce(ctx, c, grad, grad, comm.Avg)
//	err = a.Step(grad)
//
// # 1-bit Adam
//
// OnebitAdam takes the communicator and does the communication itself:
//
//	o, err := optim.NewOnebitAdam(c, optim.OnebitConfig{Config: optim.Config{LR: 1e-3}, FreezeStep: 100}, params)
//	...
//	err = o.Step(ctx, grad) // the local gradient; no all-reduce before it
//
// For the first FreezeStep steps (warm-up) it is exact Adam: it averages the
// gradients with comm.AllReduce(Avg) and updates both moments. From then on
// (the compression stage) the variance is frozen; each rank updates its
// momentum with its own local gradient, the momenta are averaged with
// onebit.AllReduce (one onebit.State per tensor, kept by the optimizer),
// and the parameters move by the compressed momentum over the frozen
// variance. Every rank ends each step with the same parameters. As in
// DeepSpeed, the compression error is kept per tensor and never
// checkpointed.
//
// Where it departs from DeepSpeed: DeepSpeed runs one extra first step that
// only allocates buffers and discards that step's gradient, and accepts
// bias_correction without applying it; here every step counts, and bias
// correction follows Config.NoBiasCorrection (in the compression stage the
// variance's correction stays that of its last update). DeepSpeed's
// exp_avg_mask and non_freeze parameter groups are not offered.
//
// # ZeRO stages 1 and 2
//
// Zero is Adam whose state is partitioned across the N ranks of a
// communicator (Rajbhandari et al., 2020; DeepSpeed's zero_optimization
// stages 1 and 2). Every rank holds all the parameters, but only about 1/N
// of the moments m and v: its share. Parameters here are float32 already,
// so there is no separate fp32 master copy to partition (DeepSpeed keeps
// one beside fp16 parameters; it would be partitioned the same way).
//
// Zero owns the gradients, through a ddp.Reducer it builds over the
// parameters' lengths: Grad(i) is gradient i's memory, a view into a
// bucket; backward writes it and calls Ready(ctx, i) as soon as it is
// final, so that full buckets are reduced while backward goes on; Step
// finishes the step:
//
//	z, err := optim.NewZero(ctx, c, optim.ZeroConfig{Config: optim.Config{LR: 1e-3}, Stage: 2}, params...)
//	...
//	for each step {
//		backward, for each tensor i as its gradient is done: fill z.Grad(i); z.Ready(ctx, i)
//		err = z.Step(ctx) // params updated in place, identical on every rank; gradients zeroed
//	}
//
// Every bucket is split evenly across the ranks: rank r owns a contiguous
// slice of every bucket (the first Len%N ranks one element more), and its
// share of the moments follows those slices. Splitting each bucket rather
// than the parameters as a whole keeps every bucket's collective separate,
// so stage 2's reduce-scatters overlap backward as DDP's all-reduces do,
// and costs at most one element per bucket of imbalance: StateBytes is
// within a few bytes of Adam.StateBytes/N.
//
// Stage 1: each bucket is averaged in place with comm.StartAllReduce(Avg)
// as it fills (DDP's reduction). Step applies Adam to this rank's slice of
// every bucket and writes the updated parameters into that slice of the
// bucket memory, whose gradients it has consumed; then
// comm.StartAllGatherV fills the rest of the bucket from the other ranks,
// and the bucket is copied into the parameters. Each bucket's all-gather
// is started as soon as its slice is updated, so it runs while the next
// bucket is updated. Stage 1 sends what DDP sends plus one all-gather of
// the parameters.
//
// Stage 2: each bucket is reduce-scattered (comm.StartReduceScatterV,
// Avg) as it fills: each rank receives only the average of its own slice,
// into a gradient share of 1/N of the parameters, which is all the update
// needs. The rest is stage 1's. A reduce-scatter and an all-gather send as
// many bytes as one all-reduce: stage 2 sends what DDP sends, and updates
// 1/N of the parameters instead of all of them.
//
// Gradient memory: stage 1 keeps every local gradient in the Reducer's
// buckets (and all-gathers the parameters through them). Stage 2 keeps
// none in full: its Reducer lends bucket memory from a pool
// (ddp.Options.BucketBuffers, 2 buffers as long as the longest bucket by
// default), which Grad(i) hands to backward and the bucket's
// reduce-scatter gives back, as DeepSpeed's stage 2 copies each gradient
// into a small bucket and frees it once reduced; Step then all-gathers
// the parameters through the same buffers, two buckets at a time. So a
// stage-2 rank holds the pool and its gradient share (GradBytes), against
// every gradient in stage 1. It saves memory once the gradients outweigh
// the pool by N/(N-1): with DDP's 25 MiB buckets, ResNet-50's 97.5 MiB
// become 50 MiB of pool and 97.5/N MiB of share (no saving on 2 ranks,
// 24% on 4), a model of 1 GiB, 562 MiB on 2 ranks. In
// stage 2, Grad(i) must be fetched in every step just before gradient i
// is written, and not kept after Ready(i).
//
// Results: an element is updated by one rank only and reaches the others
// by the all-gather, so every rank ends each step with the same bits. The
// averages are summed in the reductions' order, not rank order, so the
// parameters agree with Adam over the averaged gradients within rounding;
// on one rank they are Adam's bits. Buckets keep the layout NewZero gives
// them (the Reducer's KeepOrder): a rebuild would move elements between
// ranks' shares and their state with them.
//
// Not offered: stage 3 (the parameters partitioned too: they would have
// to be all-gathered layer by layer during forward and backward, which
// needs hooks in the model's code); gradient accumulation (the Reducer's
// SetSync, which Zero does not expose); and 1-bit Adam. 1-bit Adam does not fit:
// in its compression stage each rank updates its momentum with its own,
// unreduced gradient, so the momenta differ from rank to rank and are
// averaged whole by the compressed all-reduce, whose error feedback is
// also one full-length buffer per rank. Neither the momentum nor the
// worker error can be split into shares owned by one rank; only the
// frozen variance could, which would save a third of the state and make a
// different optimizer, not ZeRO. DeepSpeed likewise refuses 1-bit Adam
// with ZeRO.
package optim
