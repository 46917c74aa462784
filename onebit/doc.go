// Package onebit is DeepSpeed's error-compensated 1-bit all-reduce
// (compressed_allreduce of deepspeed/runtime/comm) over any *comm.Comm:
// the world or a group, on any backend. It sends one bit per element plus
// one scale per rank, about 1/32 of a float32 all-reduce, and error
// feedback makes the running average of its results converge to the true
// average. 1-bit Adam is built on it.
//
//	st := onebit.NewState(len(grad), c.Size()) // one per tensor, kept
//	for step := range steps {
//		// ... fill grad (or the momentum, in 1-bit Adam) ...
//		if err := onebit.AllReduce(ctx, c, grad, st); err != nil {
//			return err
//		}
//		// grad now holds the compressed average, the same on every rank
//	}
//
// The algorithm and its arithmetic are specified, and the documentation
// of this package is completed, in the commits that follow this one.
package onebit
