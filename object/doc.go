// Package object moves Go values between the ranks of a *comm.Comm: the
// object collectives of torch.distributed (broadcast_object_list,
// all_gather_object, gather_object, scatter_object_list) and a reduction
// of values by a Go function.
//
//	var cfg Config
//	if c.Rank() == 0 {
//		cfg = load()
//	}
//	if err := object.Broadcast(ctx, c, &cfg, 0); err != nil {
//		return err
//	}
//	names, err := object.AllGather(ctx, c, hostname)
//
// Values travel encoded with encoding/gob, which decodes data into types
// and never runs code from the wire; T must be gob-encodable (exported
// fields; interface values registered with gob.Register). Each collective
// costs at least two of the root package's: the encoded sizes, then the
// bytes. Announced sizes are bounded before anything is allocated for
// them, and decoding allocates no more than the bytes received justify.
//
// A failure on one rank (a value it cannot encode, a bad argument, bytes
// it cannot decode, a reduction function that panics) fails the call on
// every rank at once with an *Error naming that rank, instead of leaving
// the others waiting for a timeout.
//
// Every blocking function has a Start form returning a *Work[T], whose
// Wait returns the result. An object collective is several collectives
// whose sizes depend on the data, so its Start form runs the blocking form
// on a goroutine of its own (as comm.StartFunc does): do not start other
// operations on the communicator until the Work is done.
//
// # On the public API
//
// Like package onebit, this package is built on the root package's public
// collectives (comm.Broadcast, comm.AllGather, comm.AllGatherV,
// comm.GatherV, comm.ScatterV, comm.StartSend, comm.Recv) and its exported
// errors. It needs three things no public call expresses, which the root
// package hands it through internal/commhook: the reason a communicator
// cannot be used (so that a nil, zero or non-member Comm fails with the
// same words as the root package's calls), failing a call on every rank
// before its first collective (a nil pointer given to Broadcast on one
// rank), and a private view of the communicator for Associative's
// point-to-point exchanges (derived from the next sequence number, free on
// the native backend), so that they never meet the caller's own messages.
// Exporting these from the root package would widen its API for one user.
package object
