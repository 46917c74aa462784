// Package release stores a word with release order only, for memory that
// other goroutines or processes read with atomic loads: every load and
// store before the store is seen before it, but a load after it may be
// satisfied first.
//
// On x86-64 that is a plain store. sync/atomic's store is an exchange
// there, which also waits for the core's pending stores to reach the
// other cores' caches, and stops the core from running ahead in the
// meantime, a cost a small shared-memory all-reduce, which stores a few
// such words, notices (docs/performance.md). Use it
// where the writer needs no order between the store and its own later
// loads (a store-load fence), that is, not for the flag of a Dekker-style
// handshake (a sleeper's "I am going to sleep" against a waker's "I
// posted").
//
// Elsewhere, and with -tags gocomm_portable, Store64 is atomic.StoreUint64.
// The race detector does not see the assembly store: its readers' atomic
// loads are what it sees.
package release
