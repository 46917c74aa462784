// Package commhook lets a package built on the root package's public API
// (package object) reach the few internals that no public call expresses:
// why a communicator cannot be used, failing a collective on every rank
// before it starts, a private view of a communicator for point-to-point
// exchanges that never meet the caller's own messages, and recording a
// collective made of several under its own name. The root package
// sets the hooks when it is initialised; a package that imports the root
// package reads them after that, so they are always set when read.
//
// It names no type of the root package (which imports it): the hooks are
// generic in the communicator type C, and Get fails loudly on a C other
// than the one Set was given.
package commhook

import "context"

// Hooks are the root package's internals a package on its API may use.
type Hooks[C any] struct {
	// Usable says why no operation can run on c (nil, zero, or a group
	// this rank is not a member of), naming op; nil when c is usable.
	Usable func(c C, op string) error
	// FailBroadcast fails a collective made of several broadcasts before
	// it starts, as a broadcast with a bad argument fails: it consumes a
	// sequence number and aborts the world, so that the other ranks fail
	// at once with err instead of waiting. c must be usable.
	FailBroadcast func(c C, err error) error
	// NextSeq is the sequence number c's next collective will get: taken
	// before the collective, it names a private view that every rank
	// derives alike.
	NextSeq func(c C) uint64
	// Private returns a view of every rank of c, with its own id derived
	// from c's, seq and disc, whose messages never meet c's. Close it
	// after use.
	Private func(ctx context.Context, c C, seq uint64, disc int64) (C, error)
	// Begin notes that the collective op (object.Broadcast...) starts on
	// c, root its root or -1, for the flight recorder and the comms
	// logger: run its pieces under the context it returns, so that they
	// are recorded as its pieces, and call end once it is over with its
	// payload bytes on this rank and its error. c must be usable.
	Begin func(ctx context.Context, c C, op string, root int) (context.Context, func(bytes int64, err error))
}

var hooks any

// Set installs h; the root package calls it once, when it is initialised.
func Set[C any](h *Hooks[C]) { hooks = h }

// Get returns the hooks Set installed for communicator type C. It panics
// if none were: a build that links this package without the root package
// is a programming error, not a condition to handle.
func Get[C any]() *Hooks[C] {
	h, ok := hooks.(*Hooks[C])
	if !ok {
		panic("commhook: no hooks set for this communicator type")
	}
	return h
}
