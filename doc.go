// Package comm is gocomm's public API: collective communication among the
// ranks of a Go program started N times, on one host or many (what
// torch.distributed and deepspeed.comm are to Python).
//
// A program joins its world with Init, which reads the launcher's
// environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...; see env.go)
// and falls back to a world of one:
//
//	c, err := comm.Init(ctx, comm.Options{})
//	if err != nil { ... }
//	defer c.Close()
//	err = comm.AllReduce(ctx, c, grads, grads, comm.Avg) // in place
//
// Collectives are generic functions over the Numeric element types. Each has
// a blocking form and a Start form returning a *Work; the blocking form is
// the Start form, waited. Every rank of a communicator must call the same
// collectives in the same order; each carries a sequence number, and a rank
// that calls something else (another op, count, root, type or reduce op)
// gets an error naming both calls (ErrMismatch) instead of a hang.
//
// Failures are errors, never hangs or panics: every operation is bounded by
// its context or, without a deadline, by Options.Timeout; a dead peer, a
// timeout or a mismatch aborts the world so that every rank fails promptly
// with an *OpError naming the operation, rank, peer and sequence number.
// Invalid arguments (lengths, roots, an op undefined for the type) return
// ErrInvalid with what to fix; for collectives they abort the world too, so
// that the other ranks do not wait for this one.
//
// Groups (NewGroup, Split) are communicators over a subset of the world that
// share its connections; their ranks are group ranks, translated with
// GlobalRank and GroupRank. Several worlds can live in one process
// (NewLocalWorld builds one over in-memory channels); there is no
// package-level state.
package comm
