// Package conformance is the executable specification of gocomm's
// collectives: Cases that every rank of a communicator runs in the same
// order, each checking its results against a naive reference computed
// locally, so any backend, transport or world (in-process, multi-process,
// multi-host) can be checked the same way.
//
// Data flow. Cases and QuickCases enumerate the collectives over element
// types, ops, roots, counts and groups; ThresholdCases adds the message
// sizes at which the native backend changes behaviour (thresholds.go);
// RandomProgram draws a program of mixed collectives over several
// communicators from a seed. Each Case builds every rank's inputs from
// small integers (values.go), calls the public API of package comm on the
// communicator it is given, and compares. RunLocal runs cases on a world
// whose ranks live in this process; RunCase runs one case on one rank
// (for worlds of processes).
//
// Who may import it: tests, benchmarks and test programs (the root's,
// backend/native's, backend/mpi's). It imports the public package comm, so
// nothing below the root can import it outside its tests.
package conformance
