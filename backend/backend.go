package backend

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/rendezvous"
)

// Config is what a backend needs to open a world communicator. The comm
// package fills every field (defaults included) before calling Open.
type Config struct {
	Rank, Size           int
	LocalRank, LocalSize int
	Store                rendezvous.Store // rendezvous for address exchange; nil only when Size == 1
	Timeout              time.Duration    // default per-operation timeout
	Secret               []byte           // shared secret for connection handshakes
	ListenHost           string           // host data connections bind to ("" = backend's choice)
	Algorithms           core.Algorithms  // per-operation algorithm overrides
	Logger               *slog.Logger
	Transport            TransportConfig // how the native backend moves bytes (GOCOMM_TRANSPORT, GOCOMM_HOST_ID)
}

// TransportConfig says how the native backend reaches peers. Mode is ""
// or "auto" (shared memory between ranks of one host, TCP between hosts),
// "tcp" (TCP only) or "shm" (shared memory only: every rank on one host).
// HostID replaces the host identity ranks compare to find who shares a
// host: ranks with equal HostIDs are taken to share memory, so that tests
// can simulate several hosts on one machine; "" detects it.
type TransportConfig struct {
	Mode   core.TransportMode
	HostID string
	// Interface (GOCOMM_SOCKET_IFNAME) chooses the address data
	// connections bind to and publish by interface name; MasterHost (the
	// store's host) and StoreLocalIP (this rank's address on its
	// connection to the store, if any) guide the default choice. See
	// transport.TCPOptions.
	Interface, MasterHost, StoreLocalIP string
	// SingleCopyBytes is the smallest message a rank copies straight out
	// of a peer's memory on its host (transport.SHMOptions); 0 is the
	// default, negative off.
	SingleCopyBytes int
	// SHMStores is how ranks write for their peers on the host to read
	// (transport.SHMOptions.Stores): "", auto, cached or bypass.
	SHMStores string
	// TCPCongestion is the congestion control of TCP data connections
	// (transport.TCPOptions.Congestion): "", auto, system, or a name.
	TCPCongestion string
}

// Request is one operation handed to a backend, already validated by the
// comm package: lengths agree with counts, the root and peer are in range,
// the op is valid for the type. Buffers are raw little-endian element bytes;
// the backend owns them until Run returns.
type Request struct {
	Kind  core.Kind
	Seq   uint64 // per-communicator sequence number (collectives); 0 for Send/Recv
	DType core.DType
	Op    core.Op
	Root  int // communicator rank of the root (rooted collectives)
	Peer  int // Send/Recv peer, or -1 for a Recv from any source
	Tag   int // Send/Recv tag
	// User is the user-defined op Op stands for when Op.IsUser(); nil
	// otherwise.
	User *UserOp

	// Send and Recv follow torch.distributed's layouts. In-place operations
	// pass the same slice twice. See each kind in the comm package.
	Send, Recv []byte
	// Counts are the per-rank element counts of the V variants (and of the
	// non-V variants, filled in evenly by the comm package); for all-to-all
	// they are the counts this rank sends to each peer.
	Counts []int
	// RecvCounts are the counts this rank receives from each peer (all-to-all).
	RecvCounts []int
	// SigCount is the count every rank must agree on (mismatch detection).
	SigCount int

	Algorithm algo.Algorithm // Auto or a forced algorithm
	Chunk     int            // pipelining piece in elements; 0 = backend default

	Timeout time.Duration // MonitoredBarrier: how long rank 0 waits
	WaitAll bool          // MonitoredBarrier: collect every late rank

	// UpTo (Recv) accepts a message shorter than Recv, as MPI_Recv does;
	// its signature count is then not compared. Only backends whose Comm
	// reports the RecvUpTo capability honour it. A longer message fails
	// the receive with an error wrapping ErrLength that names both
	// lengths, and is consumed.
	UpTo bool

	// Results.
	Source   int            // Recv: the sender's communicator rank
	Received int            // Recv: the message's length in bytes
	Used     algo.Algorithm // the algorithm that ran
}

// Comm is a backend's communicator: a world or a group of it.
//
// Run is safe for concurrent use; operations with different sequence
// numbers may run concurrently. Collectives must be issued with the same
// sequence numbers on every rank (the comm package assigns them).
type Comm interface {
	Rank() int
	Size() int
	// Run performs req and returns when it is complete or failed.
	Run(ctx context.Context, req *Request) error
	// Group returns the sub-communicator of the given members (communicator
	// ranks, in their new rank order). Only members call it, all with the
	// same members and id.
	Group(ctx context.Context, members []int, id uint64) (Comm, error)
	// Abort fails all pending and future operations of the whole world with
	// err and tells the other ranks.
	Abort(err error)
	// Close releases the communicator. Closing the world closes its groups.
	Close() error
}

// Driver opens world communicators.
type Driver interface {
	Open(ctx context.Context, cfg Config) (Comm, error)
}

// registry is the one piece of package-level state: the table drivers add
// themselves to from init, as with database/sql.
var registry struct {
	mu      sync.Mutex // protects drivers
	drivers map[string]Driver
}

// Register makes a driver available under name. It is meant to be called
// from init; a duplicate name or a nil driver is a programming error and
// panics, as database/sql.Register does.
func Register(name string, d Driver) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if d == nil {
		panic("backend: Register driver is nil")
	}
	if _, dup := registry.drivers[name]; dup {
		panic("backend: Register called twice for driver " + name)
	}
	if registry.drivers == nil {
		registry.drivers = make(map[string]Driver)
	}
	registry.drivers[name] = d
}

// Drivers lists the registered driver names, sorted.
func Drivers() []string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	names := make([]string, 0, len(registry.drivers))
	for n := range registry.drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the driver registered under name.
func Lookup(name string) (Driver, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	d, ok := registry.drivers[name]
	return d, ok
}

// SelfBootstrapping is implemented by drivers whose worlds meet without a
// store (MPI takes ranks and connections from its launcher); comm.Init then
// opens none.
type SelfBootstrapping interface {
	OwnBootstrap() bool
}

// Bootstrapper is implemented by drivers that can introduce the ranks of a
// job to each other by themselves, for another backend's rendezvous: under
// an MPI launcher on several hosts with no meeting place configured,
// comm.Init asks the driver registered as "mpi" where rank 0's TCP store
// will be.
type Bootstrapper interface {
	// Available reports whether Bootstrap can work in this build (false
	// for a stub built without the library it needs).
	Available() bool
	// Bootstrap is called by every rank of the job; rank 0 picks a free
	// TCP port (on listenHost, or on every interface when it is "") and
	// every rank returns the same MasterAddr and MasterPort. It returns
	// when every rank has the address, ctx is done, or it fails.
	Bootstrap(ctx context.Context, listenHost string) (BootstrapInfo, error)
}

// BootstrapInfo is what a Bootstrapper learns: this process's place in the
// job and the TCP address rank 0 chose for the rendezvous store.
type BootstrapInfo struct {
	Rank, Size           int    // in the job (MPI_COMM_WORLD)
	LocalRank, LocalSize int    // among the ranks sharing this host
	MasterAddr           string // host of rank 0, as rank 0 named it
	MasterPort           int    // a port that was free on rank 0 a moment ago
}

// LocalInfo is implemented by communicators that know this host's share of
// the world better than the environment does.
type LocalInfo interface {
	Local() (rank, size int)
}

// Inliner is implemented by communicators that can run a small all-reduce
// straight on the caller's goroutine, for comm.AllReduce: on a
// shared-memory board a small all-reduce is so short that the general
// path's pooled operation handle and request, and the dispatch through
// Run, are a measurable share of it (docs/performance.md).
type Inliner interface {
	// InlinesAllReduce reports whether InlineAllReduce runs an all-reduce
	// of n bytes (no algorithm forced, a built-in op): it depends on n
	// and the communicator's configuration alone, so the caller asks
	// before it numbers the operation.
	InlinesAllReduce(n int) bool
	// InlineAllReduce runs the all-reduce seq (count elements of dt in
	// send, into recv of the same length; op built in and valid for dt)
	// as Run would run its Request, once InlinesAllReduce said it would,
	// and reports true; or, when seq cannot start now (an operation
	// numbered before it has not started, or the communicator is closed),
	// does nothing and reports false, and the caller gives the request to
	// Run. ctx ends the operation, and so does timeout from its start
	// unless ctx has a deadline. rec, unless nil, is told of the
	// operation when it reports true.
	InlineAllReduce(ctx context.Context, timeout time.Duration, seq uint64, dt core.DType, op core.Op, send, recv []byte, count int, rec InlineRecorder) (bool, error)
}

// InlineRecorder is told of the inline all-reduces (the caller's flight
// recorder), from inside them, so that recording an operation's start
// overlaps its wait for the peers: InlineEntered once the operation has
// posted its part, InlineExited when it ends, whether or not it was
// entered, before the next operation may start. Both see the all-reduce
// seq of n bytes of dt with op; the operation's turn orders them.
// Recording the start before the operation posted (a clock read, a lock,
// and the request built for it) would add to a small all-reduce's latency
// what recording it while it waits hides.
type InlineRecorder interface {
	InlineEntered(seq uint64, dt core.DType, op core.Op, n int)
	InlineExited(seq uint64, dt core.DType, op core.Op, n int, err error)
}

// Settler is implemented by world communicators whose ranks should stay
// busy for a while once set up, before the program's first operation:
// SettleTime is how long (GOCOMM_SETTLE overrides it). comm.Init spends it
// after a system call, so that the Go runtime's monitor, which polls
// often for a while after the process has idled, has slowed down before
// the first operations run.
type Settler interface {
	SettleTime() time.Duration
}

// FailureSignal is implemented by communicators that can say when their
// world has failed: aborted (here or by a peer), a peer lost, or closed.
type FailureSignal interface {
	// Failed returns a channel closed once the world has failed; nil
	// when the communicator cannot tell.
	Failed() <-chan struct{}
}

// SharedAllocator is implemented by communicators that can place a
// buffer where every rank reads it in place (comm.AllocShared): memory
// every rank of a world on one host maps.
type SharedAllocator interface {
	// AllocShared returns size zeroed bytes every rank maps, for the
	// allocation id (the same on every rank, used once), or nil and no
	// error when this communicator cannot share memory (the caller then
	// uses ordinary memory). Every rank calls it together; agree is a
	// collective that returns nil when every rank passed true.
	AllocShared(id uint64, size int, agree func(ok bool) error) ([]byte, error)
	// FreeShared releases what AllocShared returned, on this rank only;
	// anything else is left alone.
	FreeShared(mem []byte) error
	// IsShared reports whether mem lies within a live allocation.
	IsShared(mem []byte) bool
}

// LocalOpener is implemented by drivers that can open a whole world of
// size ranks inside this process, connected in memory (comm.NewLocalWorld):
// element i of the result has rank i and was opened with cfg, Rank i and
// Size size. It reads no environment and needs no Store.
type LocalOpener interface {
	OpenLocal(size int, cfg Config) ([]Comm, error)
}

// Open opens a world communicator with the named driver.
func Open(ctx context.Context, name string, cfg Config) (Comm, error) {
	registry.mu.Lock()
	d, ok := registry.drivers[name]
	registry.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("comm: unknown backend %q (registered: %v; the mpi backend needs -tags mpi and a blank import)", name, Drivers())
	}
	return d.Open(ctx, cfg)
}

// OpenLocal opens a world of size ranks inside this process with the named
// driver, which must be a LocalOpener.
func OpenLocal(name string, size int, cfg Config) ([]Comm, error) {
	d, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("comm: unknown backend %q (registered: %v)", name, Drivers())
	}
	lo, ok := d.(LocalOpener)
	if !ok {
		return nil, fmt.Errorf("comm: backend %q cannot open a world inside one process (its driver is no backend.LocalOpener)", name)
	}
	return lo.OpenLocal(size, cfg)
}
