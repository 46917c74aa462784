// Package ddp is torch DDP's Reducer for Go: it holds a model's gradients
// in buckets and all-reduces each bucket as soon as backward has produced
// all of its gradients, overlapping communication with the rest of
// backward, with DDP's communication hooks, gradient accumulation (no_sync)
// and unused-gradient handling.
//
//	r, err := ddp.New[float32](ctx, c, shapes, ddp.Options{}) // collective
//	for step := range steps {
//		for i := range backward { // last layers first
//			copy(r.Grad(i), grad(i)) // or compute into r.Grad(i) directly
//			if err := r.Ready(ctx, i); err != nil { ... }
//		}
//		if err := r.Wait(ctx); err != nil { ... }
//		// r.Grad(i) holds the gradient averaged over the ranks
//	}
//
// # Buckets
//
// New takes one shape per gradient in registration order (the order a
// model declares its parameters) and groups the gradients into buckets of
// at most Options.BucketCapBytes (25 MiB), the first of at most
// Options.FirstBucketCapBytes (1 MiB, so that the first collective starts
// early); a gradient larger than the cap is a bucket of its own. Buckets
// are filled in reverse registration order, because backward produces the
// gradients of the last layers first. Gradients live in bucket memory:
// Grad(i) is a view of it, not a copy, so a bucket is sent as it is.
//
// # Order
//
// Ready(ctx, i) says gradient i is final for the step; it may be called
// from any goroutines in any order and never waits for the network. When
// a bucket is full, it is started (one collective per bucket, through the
// hook) as soon as every bucket before it has been: buckets are started
// strictly in bucket order, so every rank issues the same collectives in
// the same order whatever order its gradients arrive in. Wait ends the
// step: it waits for every bucket and leaves the averaged gradients in
// bucket memory. Because buckets start when each rank's gradients are
// ready, at times that differ between ranks, start no other collective on
// the Reducer's communicator between a step's first Ready and its Wait
// (use another one, from c.Split, for what must run then).
//
// After the first synced step the buckets are rebuilt once (DDP's
// rebuild_buckets): rank 0's order of Ready calls in that step is
// broadcast, and every rank regroups its gradients in that order, so that
// buckets fill in the order the model really produces them. The
// gradients move to new memory with their values; Grad(i) returns the new
// views from then on. Options.KeepOrder keeps the first layout.
//
// # Hooks
//
// A Hook reduces a full bucket and returns its *comm.Work: AllReduceHook
// (the default; comm.Avg in place), FP16CompressHook and BF16CompressHook
// (float32 gradients sent as 16-bit values), OnebitHook (package onebit's
// error-compensated 1-bit average, one state per bucket), or any function
// with the Hook signature (HookFunc adapts a blocking one). Hooks are
// called in bucket order, one at a time; a hook must start its
// collectives in that order (see Hook).
//
// # Accumulation and unused gradients
//
// SetSync(false) is DDP's no_sync: steps send nothing and gradients
// accumulate in bucket memory (add each step's gradient to Grad(i)); the
// next synced step reduces the accumulated sums. A gradient counts as
// ready if it was marked in any step since the last synced one.
//
// A gradient not marked ready by Wait of a synced step is reduced as
// zeros with Options.FindUnused (DDP's find_unused_parameters). Its bucket,
// and the buckets after it, start at Wait: gocomm sees no graph, so it
// cannot know earlier, as torch does after the forward pass, that a
// gradient will not come. Without FindUnused, Wait fails with ErrUnused
// naming the gradients, and, because the other ranks are waiting for
// buckets this rank can never start, it aborts the communicator's world
// (comm.Comm.Abort) with that error: every rank fails at once with the
// same message instead of waiting for the timeout. (On the mpi backend a
// rank already inside a blocking MPI call cannot leave it; the backend
// ends the job ten seconds later with the same message, unless
// GOCOMM_MPI_BLOCKING_MAX=none.) This costs the normal path nothing, one collective per bucket
// and no flag exchanged; the price is that the communicator is unusable
// afterwards, as after a collective given a bad argument, which is what
// a step with a gradient missing on one rank is. Registration mistakes
// are caught earlier and cheaply: New compares a digest of every rank's
// shapes, element type and options with one all-gather, and only when
// they differ exchanges the lists themselves so that the error (ErrMismatch,
// on every rank, with the communicator still usable) can name the first
// gradient that differs, its shape on each rank, and the ranks.
//
// # Data flow
//
// The caller writes gradients into bucket memory through Grad(i); Ready
// hands a full bucket to the hook, which starts a collective of package
// comm on it in place; Wait waits for those collectives, then the caller
// reads the reduced gradients through Grad(i). Nothing is copied except
// by the compressing hooks (to their 16-bit copies) and by the one
// rebuild.
//
// # Who may import it
//
// Programs that train data-parallel, and packages above the public API
// (optim's sharded optimizers). It is built on the public API of package
// comm, package object (New's mismatch report) and package onebit
// (OnebitHook) only.
package ddp
