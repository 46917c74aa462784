// Package native is gocomm's default backend: it runs the pure schedules
// of package algo over a transport.Endpoint (shared memory between the
// ranks of one host, TCP between hosts, or in-process for tests). It
// registers itself with package backend under the name "native".
//
// Data flow. Driver.Open connects the transport through the rendezvous
// store in backend.Config and returns the world Comm. For each
// backend.Request, Comm chooses an algorithm (the cost model, or the
// Config's overrides; on a host whose ranks outnumber its CPUs the
// schedules with the fewest dependent exchanges, collective.go), lays the
// caller's buffers out as the plan's Work and scratch expect (layout.go; an out-of-place input is copied lazily,
// lazy.go), builds or reuses the rank's algo.Plan (plans.go), and runs its
// steps (engine.go): sends and receives go to the transport (a step's
// large sends to several TCP peers side by side), reductions to
// internal/kernel, and the result is copied where the caller wants it.
// Collectives on communicators that span hosts can run hierarchically
// (hier.go): inside each host first, then among the hosts' leaders. On a
// world whose ranks all share one host's memory, small all-reduces,
// reduces, broadcasts, all-gathers and barriers (up to a limit per kind,
// board.go: all-reduce 8 KiB, all-gather 16 KiB per rank, reduce 2 KiB,
// broadcast 1 KiB; no algorithm forced) skip all of that: each rank posts
// its contribution on the shared-memory board and reads the others' there
// (internal/shmcoll's Board); larger all-reduces, and large broadcasts,
// all-to-alls, all-gathers and reduce-scatters, run on the board's stage
// (board.go decides which; shmcoll runs them), and all-reduces of
// buffers every rank allocated shared (shared.go) run in place. native
// builds the board over the areas the transport's segment sets aside
// (shmcoll.Areas, transport.Hybrid.Areas) and orders the collectives that
// use it (turn). Buffers the engine allocates come from internal/bufpool.
//
// Who may import it: the root package comm (which imports it for its
// registration) and tests. It imports backend, algo, internal/transport,
// internal/shmcoll, core and the internal kernels and pools; never
// backend/mpi or the root.
package native
