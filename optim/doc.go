// Package optim holds optimizers for data-parallel training over gocomm:
// Adam, and 1-bit Adam as DeepSpeed's OnebitAdam
// (deepspeed/runtime/fp16/onebit/adam.py), whose compression stage
// all-reduces the momentum with the error-compensated 1-bit all-reduce of
// package onebit, cutting the bytes sent per step about 20-30 times.
//
// Both work on float32 parameter tensors the caller owns (one []float32
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
package optim
