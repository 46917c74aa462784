// Package mpi is gocomm's MPI backend: every operation of backend.Comm runs
// on the system MPI library (Open MPI, or MPICH) through cgo, so that a
// gocomm program started by mpirun or srun uses the cluster's fabric
// (InfiniBand, Omni-Path, Slingshot) through MPI.
//
// The backend is built only with cgo and the build tag mpi:
//
//	apt-get install libopenmpi-dev openmpi-bin   # or your site's MPI module
//	go build -tags mpi ./...
//	mpirun -np 4 ./myprogram                      # GOCOMM_BACKEND=mpi, or Options.Backend
//
// Without the tag (or without cgo) the package is a pure-Go stub with the
// same API whose Open and Bootstrap return an error wrapping
// [ErrUnavailable] that says how to rebuild; the default build stays pure Go.
//
// Importing the package (for its side effect) registers two drivers with
// package backend: [Name] ("mpi") and [FunneledName] ("mpi-funneled").
//
//	import _ "github.com/gocomm/comm/backend/mpi"
//	c, err := comm.Init(ctx, comm.Options{Backend: "mpi"})
//
// # Ranks and worlds
//
// Rank and size come from MPI_COMM_WORLD, not from the configuration: a
// configuration that disagrees with MPI (another Size, another Rank) is an
// error naming both. Each world is a duplicate of MPI_COMM_WORLD, groups
// are MPI communicators made with MPI_Comm_create_group, so several worlds
// and groups live side by side. MPI is initialised once per process (with
// MPI_Init_thread, unless the program initialised it already) and finalised
// when the last world opened by this package closes; MPI cannot be
// initialised twice, so after that Open fails with ErrUnavailable.
//
// # Threading
//
// The "mpi" driver asks for MPI_THREAD_MULTIPLE. When MPI grants it, each
// operation calls MPI on the goroutine that runs it, and no other
// goroutine is involved. When MPI grants less, and always with
// "mpi-funneled" (which asks for MPI_THREAD_FUNNELED, for MPIs whose
// multi-threaded mode is slow or broken), every MPI call runs on one
// goroutine locked to the OS thread that initialised MPI, fed through a
// queue. MPI_Init_thread and MPI_Finalize always run on that thread, as
// MPI requires.
//
// Collectives on one communicator are started in sequence-number order
// (Request.Seq, which the comm package assigns in call order), whatever
// order the goroutines reach Run in, because MPI matches collectives by
// the order they are started. A Request with Seq 0 is started at once.
//
// # Blocking and nonblocking MPI calls
//
// Open MPI's blocking collectives are about twice as fast as its
// nonblocking ones on small messages, and faster still than a nonblocking
// call polled from Go; on very large messages its nonblocking all-reduce
// avoids the blocking one's default algorithm, 7x slower from 32 MiB up.
// So an all-reduce of up to 16 MiB, a broadcast of up to 1 MiB and any
// other collective of up to 4 MiB is one cgo call into
// the blocking MPI function (MPI_Allreduce, MPI_Bcast, ...) on the Go
// buffers as they are, with no copy and no allocation; a larger one is
// the nonblocking function (MPI_Iallreduce, ...) waited from Go. The
// sizes are the reduced or broadcast buffer, or the total of the counts
// (gathers, scatters, reduce-scatters, all-to-all); all-to-all-v always
// uses the nonblocking call, funnelled worlds and Seq 0 requests too.
// [EnvBlockingMax] (GOCOMM_MPI_BLOCKING_MAX) overrides the table: a size
// for every kind ("64K"), "none" for no blocking call at all, or entries
// such as "allreduce=16M,broadcast=none,*=1M". MPI never matches a
// blocking collective with a nonblocking one, so the choice depends only
// on the kind and a size every rank knows, and the variable must be the
// same on every rank (mpirun -x GOCOMM_MPI_BLOCKING_MAX=...): otherwise
// the ranks wait for each other forever. For the same reason the Start
// forms of the comm package make the same MPI call as the blocking forms,
// on the goroutine that runs them: a small Start is a blocking MPI call
// on its own OS thread (so MPI progresses it without polling), and only
// the sizes above the table, or every size with "none", are nonblocking
// MPI underneath. A blocking call holds its communicator's turn until it
// returns: the next collective of that communicator starts after it.
//
// # Waiting, timeouts and failures
//
// A nonblocking operation polls: a short spin, then sched_yield, then
// sleeps of up to 200µs. Open MPI only advances nonblocking collectives
// inside MPI calls, so the polls are also what moves them along. Its
// waits honour ctx. mpirun binds each rank to a core by default, so a Go
// program's runtime threads share that core with the polling thread; that
// costs about a microsecond per small operation against a C program (see
// BenchmarkOverhead) and is still better than --bind-to none on a machine
// with as many ranks as cores.
//
// A blocking MPI call cannot be interrupted. Its ctx and the world's
// health are checked before the call; while MPI runs it, a watchdog
// goroutine per world looks every 20ms: once the ctx has ended, or the
// world has failed (Abort on any rank, a peer's timeout, Close), it gives
// the call up: the world is aborted as below, and the call returns that
// error when MPI lets it return, which is when every rank has joined it.
// A rank that learns of the abort first does not join, so when MPI has
// not let the call return 10 seconds after it was given up, the watchdog
// ends the job with MPI_Abort, after logging and printing why, rather
// than leave the rank hanging. Programs that need every ctx to end its
// collective, and the world to survive as an error, set
// GOCOMM_MPI_BLOCKING_MAX=none.
//
// MPI cannot withdraw a started collective. When a collective's ctx ends,
// or MPI reports an error, the operation returns a *core.OpError and
// the world is aborted exactly as by Abort: every pending and later
// operation of the world, on every rank, fails with an error matching
// transport.ErrAborted. Abort never calls MPI_Abort, which would kill the
// job: every world keeps a receive posted on a private duplicate of
// MPI_COMM_WORLD, and Abort sends the reason to every other rank there;
// the receiving ranks' waiting operations see it at their next poll. A
// receive whose ctx ends is cancelled (MPI_Cancel) and fails alone; a send
// whose ctx ends fails alone and stays with MPI.
//
// # Buffers
//
// A blocking call gets the Go buffers themselves, for the duration of the
// call (they hold no Go pointers, as cgo requires). For a nonblocking
// call, buffers of up to 1 KiB per operation (all of its buffers
// together) are staged: copied into C memory that belongs to the request,
// and copied back once MPI has completed the operation. Larger Go buffers
// are handed to MPI without copying, pinned with runtime.Pinner from the
// start of the MPI call until MPI has completed it. The count and
// displacement arrays of the V variants live in C memory. When a
// nonblocking operation is abandoned (ctx ended, world aborted or
// closed), MPI may still read or write its buffers: staged ones are C
// memory that is never reused, pinned Go buffers stay pinned, and alive,
// until MPI_Finalize returns, and their contents may still change.
//
// # Types and reductions
//
// Every element type and reduce op of package backend is supported, with
// the results of the native backend's kernels (internal/kernel):
// integers wrap, Avg is a Sum followed by kernel.Divide, float16 and
// bfloat16 are reduced by user-defined MPI ops that widen to float32,
// operate and round back to nearest even, and Min and Max of float types
// use user-defined ops with Go's rules (NaN wins, -0 < +0) because the C
// comparison MPI_MIN and MPI_MAX use does not. As in any backend, the order
// in which MPI combines the ranks' contributions is MPI's own, so float
// sums of inexact values may round differently from the native backend's
// ring or tree; exact inputs give identical bits.
//
// MPI counts are C ints: an operation with more than 2^31-1 elements in one
// block, or in total for the V variants, is refused with an error.
// Collectives that disagree across ranks (different counts or kinds) are
// not detected as comm.ErrMismatch, as MPI carries no signatures; they end
// in an MPI error or a timeout.
//
// # Bootstrapping the native backend
//
// [Bootstrap] lets the native backend meet under mpirun without
// MASTER_ADDR: rank 0 picks a free TCP port and MPI broadcasts
// "host:port" to every rank, which then uses it as the master address.
package mpi

import (
	"errors"
	"fmt"
)

// Driver names under which the package registers itself with package
// backend.
const (
	// Name is the default MPI driver: MPI_THREAD_MULTIPLE when granted.
	Name = "mpi"
	// FunneledName always funnels every MPI call through one locked OS
	// thread (MPI_THREAD_FUNNELED).
	FunneledName = "mpi-funneled"
)

// EnvBlockingMax is the environment variable that overrides the sizes up
// to which collectives use the blocking MPI function: a size for every
// kind ("64K", "1M", "1048576"), "none" for no blocking call at all (every
// collective can then be ended by its ctx), or a comma-separated list of
// kind=size entries ("allreduce=16M,broadcast=none,*=1M"; "*" is every
// kind not named; kinds not named keep their default). Open reads it;
// it must be the same on every rank (see "Blocking and nonblocking MPI
// calls" above).
const EnvBlockingMax = "GOCOMM_MPI_BLOCKING_MAX"

// ErrUnavailable is wrapped by the errors of Open and Bootstrap when MPI
// cannot be used in this process: the package was built without cgo or
// without the mpi tag, or MPI was finalised already.
var ErrUnavailable = errors.New("comm: the mpi backend is unavailable")

// Driver opens MPI worlds; Open is safe for concurrent use.
type Driver struct {
	// Funneled forces every MPI call onto one locked OS thread even when
	// MPI_THREAD_MULTIPLE is available.
	Funneled bool
}

// OwnBootstrap reports that this driver needs no rendezvous store: MPI's
// launcher has introduced the ranks already (Config.Store is ignored, and
// rank and size come from MPI). The comm package can test for it with an
// interface{ OwnBootstrap() bool }.
func (Driver) OwnBootstrap() bool { return true }

// BootstrapInfo is what Bootstrap learns from MPI: this process's place in
// MPI_COMM_WORLD and the TCP address rank 0 chose for the rendezvous.
type BootstrapInfo struct {
	Rank, Size           int    // in MPI_COMM_WORLD
	LocalRank, LocalSize int    // among the ranks sharing this host (MPI_COMM_TYPE_SHARED)
	MasterAddr           string // host of rank 0, as rank 0 named it
	MasterPort           int    // a port that was free on rank 0 a moment ago
}

// Error is an error reported by an MPI function.
type Error struct {
	Func  string // the MPI function, e.g. "MPI_Iallreduce"
	Code  int    // the MPI error code
	Class int    // its error class (MPI_Error_class)
	Msg   string // MPI_Error_string
}

func (e *Error) Error() string {
	return fmt.Sprintf("comm: %s failed: %s (MPI error code %d, class %d)", e.Func, e.Msg, e.Code, e.Class)
}
