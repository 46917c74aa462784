// Package backend is the seam between the public package comm and the
// engines that carry out its operations: the Backend (Driver, Comm)
// interfaces, a registry in the manner of database/sql (Register, Lookup,
// Open), the Config a world is opened with, and the Request that describes
// one operation.
//
// Data flow. comm resolves its Options into a Config and opens a world with
// Open(name, cfg), which hands it to the Driver registered under name
// (backend/native, or backend/mpi when built with -tags mpi). Each call of
// the public API becomes one Request (its kind, element type, op, buffers,
// counts, root), passed to Comm.Run; the backend reads the send buffers and
// writes the receive buffers the Request names, and returns an error that
// wraps a *core.OpError. Backends that bootstrap themselves (MPI), know
// their own placement, or can open a world inside one process
// (comm.NewLocalWorld, through OpenLocal) implement the optional extension
// interfaces (SelfBootstrapping, Bootstrapper, LocalInfo, LocalOpener)
// that comm probes for.
//
// Who may import it: the root package comm and the backends below it. It
// imports only the shared words (core), the algorithm names (algo) and the
// rendezvous Store; it must not import a transport or a backend.
package backend
