// Package algo holds gocomm's collective algorithms as pure schedules: a
// function of (algorithm, rank, size, counts) returning the Plan of one
// rank, a list of steps of sends, receives and local copies. There is no I/O
// and no concurrency here; an engine (backend/native) runs plans over a
// transport, and the tests run every rank's plan in an in-memory simulator
// against a naive reference.
package algo
