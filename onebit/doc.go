// Package onebit is DeepSpeed's error-compensated 1-bit all-reduce
// (compressed_allreduce of deepspeed/runtime/comm, the NCCL, MPI, HCCL and
// Compressed backends) over any *comm.Comm: the world or a group, on any
// backend (native, mpi). Each rank sends about one bit per element and a
// few scales instead of float32 values, about 1/32 of an all-reduce's
// traffic, and error feedback makes the running average of its results
// converge to the true average. 1-bit Adam (package optim) is built on it.
//
//	st := onebit.NewState(len(grad), c.Size()) // one per tensor, kept
//	for step := range steps {
//		// ... fill grad (in 1-bit Adam: the local momentum) ...
//		if err := onebit.AllReduce(ctx, c, grad, st); err != nil {
//			return err
//		}
//		// grad holds the compressed average, the same bits on every rank
//	}
//
// # The algorithm
//
// With N ranks, a tensor of L float32 values and the padded length W =
// len(st.WorkerError) (a multiple of 8N, at least L; NewState picks
// PaddedLen, DeepSpeed's N*lcm(N, 8) rule), rank r:
//
//  1. pads its buffer with +0 to W values (the tail takes part in
//     everything below) and adds its worker error: b = x + e;
//  2. computes its scale, the RMS of b: every value widened to float64,
//     squared and summed in index order, sqrt in float64, rounded to
//     float32, divided in float32 by float32(sqrt(W));
//  3. takes the signs of b (+1 unless b < 0: +0, -0 and NaN give +1), packs
//     them MSB first (element 8k+i is bit 7-i of byte k) and keeps the new
//     error e = b - scale*sign;
//  4. phase 1: sends chunk j of the packed signs (W/(8N) bytes) to rank j
//     (an all-to-all) and all-gathers the scales;
//  5. as the server of chunk r (C = W/N elements) sums, in rank order from
//     zero, sign_j * float32(scale_j * float32(1/N)), adds its server error,
//     and compresses that like steps 2 and 3 with its own scale and error;
//  6. phase 2: all-gathers every server's packed signs and scale, and sets
//     element i of chunk j to scale_j * sign (scale_j or -scale_j); the first
//     L values are the result, left in the caller's buffer.
//
// Every step is an IEEE float32 operation as DeepSpeed's (products that
// are then added are converted explicitly, so Go never fuses them into a
// multiply-add), except the norm, which DeepSpeed leaves to torch and
// which gocomm fixes as above (reference: shared deepspeed-comm.md §6.2,
// §6.4): the results are the same bits on every rank, every CPU and
// every backend. Summed over steps, the outputs equal the summed true
// averages minus the final errors, so their running mean converges as
// O(1/T); without the errors it stays biased.
//
// On the wire this is three collectives: an all-gather of a small header
// per rank (its scale, and its lengths and whether its arguments are
// valid, so that bad input on any rank fails every rank at once instead
// of leaving the others waiting), the all-to-all of signs (the new worker
// error is computed while it travels), and one all-gather of each
// server's signs with its scale. Per rank that is (N-1)/N * W/8 bytes of
// signs in phase 1 and W/(8N) in phase 2, plus 4 bytes of scale and 40 of
// header each.
//
// # State and buffers
//
// A State belongs to the caller: one per tensor per rank, kept across
// steps and passed to every call for that tensor; it also caches the
// call's working buffers (about 3W/8 + 4W/N bytes). It must not be used by
// two calls at once; zero its errors to restart the feedback (DeepSpeed
// neither checkpoints them). Every rank must use the same W. The buffer
// passed to AllReduce belongs to the call until it returns (or, for
// StartAllReduce, until the Work is done).
//
// # Differences from DeepSpeed
//
//   - Any communicator and backend: DeepSpeed's MpiBackend always uses
//     MPI.COMM_WORLD; here a group from Split or NewGroup works on every
//     backend, which also avoids DeepSpeed's wrong-group hangs with
//     pipeline or model parallelism.
//   - Bit order: MSB first as the NCCL, MPI and Compressed backends (numpy
//     and cupy packbits). HcclBackend packs LSB first (npu_sign_bits_pack),
//     and the Compressed (XPU) backend packs -0 as -1 against its own error
//     update; the numbers are otherwise the same, so only those wire bytes
//     differ. gocomm packs every rank the same way, so it does not matter
//     which one a user came from.
//   - Host memory only: DeepSpeed works on device tensors (cupy, torch_npu)
//     and MpiBackend without CUDA-aware MPI stages through host buffers;
//     gocomm's buffers are Go slices.
//   - The norm is reproducible (above), where DeepSpeed's differs by about
//     an ulp between devices; the server sum is in rank order on every
//     backend, where CUDA's reduction may group terms for N > 4.
//   - The result always lands in the caller's buffer (DeepSpeed returns a
//     new tensor when it had to pad), and the input is not scribbled on
//     beyond that.
//   - Bad input is an error on every rank, never a hang or a cupy
//     exception on some ranks only; a world of one returns the input
//     unchanged (DeepSpeed never calls it with one rank).
package onebit
