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
// operation calls MPI on the goroutine that runs it: it starts the
// nonblocking MPI call (MPI_Iallreduce, MPI_Isend, ...) and polls
// MPI_Test, so no OS thread ever blocks inside MPI for an operation and
// concurrent operations make progress together. When MPI grants less, and
// always with "mpi-funneled" (which asks for MPI_THREAD_FUNNELED, for MPIs
// whose multi-threaded mode is slow or broken), every MPI call, polls
// included, runs on one goroutine locked to the OS thread that initialised
// MPI, fed through a queue. MPI_Init_thread and MPI_Finalize always run on
// that thread, as MPI requires.
//
// Collectives on one communicator are started in sequence-number order
// (Request.Seq, which the comm package assigns in call order), whatever
// order the goroutines reach Run in, because MPI matches collectives by
// the order they are started. A Request with Seq 0 is started at once.
//
// # Waiting, timeouts and failures
//
// A waiting operation polls: a short spin, then sched_yield, then sleeps of
// up to 200µs. Open MPI only advances nonblocking collectives inside MPI
// calls, so the polls are also what moves them along. Waits honour ctx.
// mpirun binds each rank to a core by default, so a Go program's runtime
// threads share that core with the polling thread; that costs about a
// microsecond per small operation against a C program (see
// BenchmarkOverhead) and is still better than --bind-to none on a machine
// with as many ranks as cores.
//
// MPI cannot withdraw a started collective. When a collective's ctx ends,
// or MPI reports an error, the operation returns an *backend.OpError and
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
// Buffers of up to 1 KiB per operation (all of its buffers together) are
// staged: copied into C memory that belongs to the request, and copied
// back once MPI has completed the operation. Larger Go buffers are handed
// to MPI without copying, pinned with runtime.Pinner from the start of the
// MPI call until MPI has completed it. The count and displacement arrays of
// the V variants live in C memory. When an operation is abandoned (ctx
// ended, world aborted or closed), MPI may still read or write its
// buffers: staged ones are C memory that is never reused, pinned Go
// buffers stay pinned, and alive, until MPI_Finalize returns, and their
// contents may still change.
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
