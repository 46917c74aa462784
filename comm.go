package comm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/internal/cpubind"
	"github.com/gocomm/comm/internal/opctx"
	"github.com/gocomm/comm/profile"
	"github.com/gocomm/comm/rendezvous"
)

// DefaultTimeout bounds every operation whose context has no deadline. It
// matches torch.distributed's default. Init is bounded by 10 minutes unless
// a timeout was chosen (see Init).
const DefaultTimeout = 30 * time.Minute

// Options configures Init. The zero value works: everything unset is taken
// from the environment (package env documents the variables), and with no
// environment the world is this process alone. A field that is set beats
// the environment variable named on it.
type Options struct {
	// Rank and Size of this process in the world (RANK and WORLD_SIZE,
	// or the launcher's equivalents: package env lists them). Size 0
	// means "from the environment"; when Size is set, Rank must be too.
	Rank, Size int
	// LocalRank and LocalSize describe this host's share of the world
	// (LOCAL_RANK, LOCAL_WORLD_SIZE, or the launcher's). Zero LocalSize
	// means "from the environment", else Size.
	LocalRank, LocalSize int
	// MasterAddr and MasterPort locate the TCP store rank 0 hosts
	// (MASTER_ADDR, MASTER_PORT).
	MasterAddr string
	MasterPort int
	// InitMethod is the meeting place as torch's init_method names it
	// (GOCOMM_INIT_METHOD): "env://" (the default: MASTER_ADDR and
	// MASTER_PORT, or the launcher's), "tcp://host:port" (rank 0 hosts
	// the store there), "file:///absolute/path" (a file every rank can
	// reach) or "etcd://host:port[,host:port...]/job-prefix[?ttl=10s]"
	// (an etcd cluster keeps the store under a prefix naming the job, and
	// no rank hosts it: any rank, rank 0 included, may be lost and the
	// survivors Shrink). MasterAddr/MasterPort and Store take precedence
	// over it.
	InitMethod string
	// Store replaces the TCP store (a FileStore on a shared file system, a
	// MemStore for worlds inside one process, or any rendezvous.Store).
	// No variable mirrors it.
	Store rendezvous.Store
	// Backend names the backend driver; "" is "native" (GOCOMM_BACKEND).
	Backend string
	// Timeout bounds operations whose context has no deadline, and Init
	// unless GOCOMM_INIT_TIMEOUT is set; 0 is GOCOMM_TIMEOUT (else
	// DEEPSPEED_TIMEOUT, in minutes), else DefaultTimeout for operations
	// and 10 minutes for Init; negative is an error.
	Timeout time.Duration
	// Secret authenticates data connections (GOCOMM_SECRET). Every rank
	// must use the same one.
	Secret []byte
	// Algorithms forces algorithms per operation (GOCOMM_ALGO_<OP>, e.g.
	// GOCOMM_ALGO_ALLREDUCE=ring, for each field left zero); the zero
	// value leaves them to the cost model.
	Algorithms Algorithms
	// Transport holds the native backend's knobs: how ranks reach each
	// other and how bytes move (GOCOMM_TRANSPORT and the others named on
	// its fields).
	Transport TransportOptions
	// Logger receives diagnostics; nil discards them, unless GOCOMM_DEBUG
	// asks for them on standard error.
	Logger *slog.Logger
	// Getenv replaces os.Getenv (tests); nil is os.Getenv.
	Getenv func(string) string
	// Profile configures the comms logger (package profile); nil takes it
	// from GOCOMM_PROFILE and the other variables profile.FromEnv names
	// (Init only: NewLocalWorld reads no environment), and a Config whose
	// Enabled is false is off.
	Profile *profile.Config
	// DebugAddr, "host:port", serves the flight recorders as JSON over
	// HTTP (GOCOMM_DEBUG_ADDR): local rank l listens on port+l, and port 0
	// lets the kernel choose (see Comm.DebugAddr). "" serves nothing.
	DebugAddr string
	// FlightRecorderSignal dumps the flight recorders as JSON on SIGUSR1
	// (GOCOMM_FLIGHT_RECORDER_SIGNAL): "1" or "stderr" to standard error,
	// else into that directory. "" leaves SIGUSR1 alone.
	FlightRecorderSignal string
}

// TransportOptions are the native backend's knobs (other backends ignore
// them). Each zero field is taken from the environment variable named on
// it; package env and docs/tuning.md say when to change one.
type TransportOptions struct {
	// Kind is how ranks reach each other (GOCOMM_TRANSPORT).
	Kind TransportKind
	// HostID replaces the detected host identity (hostname and boot id):
	// ranks with equal ids share memory. Tests use it to simulate several
	// hosts on one machine (GOCOMM_HOST_ID).
	HostID string
	// ListenHost is the host data connections bind to and publish
	// (GOCOMM_SOCKET_HOST); "" lets the backend choose an address the
	// other ranks can reach (see SocketIfname).
	ListenHost string
	// SocketIfname chooses the address data connections bind to and
	// publish by network interface (GOCOMM_SOCKET_IFNAME, else
	// GLOO_SOCKET_IFNAME), as NCCL_SOCKET_IFNAME does: "eth" matches eth0,
	// eth1...; "=eth0" exactly eth0; "^docker,lo" anything but those.
	// Unset, the address is that of the route to the master's host
	// (MASTER_ADDR), or 127.0.0.1 when the master is on loopback.
	SocketIfname string
	// TCPCongestion is the TCP congestion control of the data connections
	// (GOCOMM_TCP_CONGESTION; Linux): "auto" or "" (reno between ranks of
	// one host, where pacing (bbr) and delay-based slow-start exit (cubic)
	// only cost, the system's choice between hosts), "system" (the
	// system's choice everywhere), or an algorithm the kernel has (reno,
	// cubic, bbr...) for every connection.
	TCPCongestion string
	// SHMStores is how ranks write what their peers on the host read next
	// (GOCOMM_SHM_STORES): "cached" (plain copies: the peer reads the
	// lines from the shared cache), "bypass" (stores that bypass the
	// writer's cache: the peer reads them from memory), or "auto" or ""
	// (cached when the host's CPUs share one last-level cache, else
	// bypass). The choice holds for the whole process.
	SHMStores string
	// SingleCopyBytes is the smallest message that ranks on one host copy
	// straight out of the sender's memory (Linux process_vm_readv) instead
	// of through the shared-memory ring, where the kernel allows it
	// (GOCOMM_SHM_SINGLE_COPY: bytes, or "off"). 0: the default (never
	// when each rank of the host has a CPU of its own, else 256 KiB);
	// negative: never.
	SingleCopyBytes int
}

// TransportKind says how the native backend's ranks reach each other.
type TransportKind string

// The transport kinds (GOCOMM_TRANSPORT takes the same strings).
const (
	// TransportAuto: shared memory between ranks of one host, TCP between
	// hosts. The zero value, which GOCOMM_TRANSPORT may override; "auto"
	// set explicitly does not let it.
	TransportAuto TransportKind = ""
	// TransportTCP: TCP to every peer.
	TransportTCP TransportKind = "tcp"
	// TransportSHM: shared memory to every peer; every rank must be on
	// one host.
	TransportSHM TransportKind = "shm"
)

// String returns the kind as GOCOMM_TRANSPORT spells it ("auto" for the
// zero value).
func (k TransportKind) String() string {
	if k == TransportAuto {
		return "auto"
	}
	return string(k)
}

// Comm is a communicator: the world, or a group of it. Collectives are
// package-level generic functions taking a *Comm.
//
// A Comm is safe for concurrent use, but every rank must issue the
// collectives of one communicator in the same order: the order of the
// Start calls (or of the blocking calls) is the order they are matched in.
type Comm struct {
	be      backend.Comm // nil for a non-member of a group
	id      uint64
	timeout time.Duration
	opCtxs  opctx.Pool // operations' contexts, for those whose ctx has no deadline
	log     *slog.Logger
	rank    int   // rank in this communicator, -1 for a non-member
	size    int   // communicator size
	global  []int // communicator rank -> world rank
	world   *Comm // nil for the world itself
	local   struct{ rank, size int }
	store   rendezvous.Store
	// ownStore is set when Init created the store (it closes it).
	ownStore bool
	// backendName is the name of the driver the world was opened with
	// (Backend).
	backendName string

	// prof is the comms logger (profiler.go), shared by a world and its
	// groups; nil when it is off.
	prof *profiler
	// inline is be's backend.Inliner, if it is one (allReduceInline);
	// inlineRec records its operations in rec.
	inline    backend.Inliner
	inlineRec inlineRecord

	// ops holds the user-defined reduce ops (userop.go); on the world only.
	ops opTable

	// sharedIDs numbers c's shared allocations (shared.go), alike on every
	// rank.
	sharedIDs atomic.Uint64

	// rec is this communicator's flight recorder (flightrec.go); flight,
	// on the world only, holds its groups' recorders too.
	rec    *flightRecorder
	flight *flightWorld
	// shrink is what Shrink needs to open a world of the survivors
	// (shrink.go); on the world only.
	shrink shrinkState

	mu     sync.Mutex // protects ownStore
	seq    atomic.Uint64
	closed atomic.Bool
}

// Init joins the world described by opts and the environment, and returns
// this process's world communicator; Close it when done.
//
// What it reads, in order (a field of opts that is set beats the variable
// it mirrors; package env documents every variable):
//  1. The world: opts.Rank and opts.Size, else the launcher's variables,
//     looked for in this order: torchrun's (RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE; also DeepSpeed, Kubeflow, commrun and
//     launch.Spawn), Open MPI's (OMPI_COMM_WORLD_*), PMI's (PMI_RANK,
//     PMI_SIZE: MPICH, Hydra, Intel MPI), SLURM's (SLURM_PROCID,
//     SLURM_NTASKS). With none of them and opts.Size 0 the world is this
//     process alone: a world of one, which needs no meeting place.
//  2. gocomm's knobs for the fields opts left unset: GOCOMM_BACKEND,
//     GOCOMM_TIMEOUT, GOCOMM_SECRET, the transport's (Options.Transport),
//     GOCOMM_ALGO_<OP>, GOCOMM_BIND, GOCOMM_SETTLE, GOCOMM_DEBUG and the
//     comms logger's GOCOMM_PROFILE*.
//  3. The meeting place of a world of several ranks: opts.Store, else
//     opts.MasterAddr/MasterPort, else opts.InitMethod, else the
//     launcher's (MASTER_ADDR and MASTER_PORT, torchrun's agent store, a
//     file named by the MPI job), else GOCOMM_INIT_METHOD. Rank 0 hosts a
//     TCP store there unless the store already exists (torchrun's agent,
//     a file, or an etcd cluster, of which every rank is a client).
//
// A missing or malformed variable is an error wrapping ErrEnvironment that
// names it and says what to set. With GOCOMM_JOIN=1 (set by commrun
// --elastic for the processes that replace failed ranks) and opts.Size 0,
// Init is Join: the process joins the running world when its ranks call
// Grow.
//
// Init blocks until every rank of the world has joined (each connects to
// the others through the meeting place), ctx is done, or Init's timeout
// passes: GOCOMM_INIT_TIMEOUT, else opts.Timeout or GOCOMM_TIMEOUT when
// set, else 10 minutes. opts.Timeout, else GOCOMM_TIMEOUT, else
// DefaultTimeout (30 minutes) later bounds every operation whose ctx has
// no deadline.
//
// Before connecting, every rank records in the store its world size and
// job identity (package env's JobIdentity); when two ranks disagree every
// rank fails at once with one error, wrapping ErrEnvironment, that names
// which ranks said what. While it waits for ranks, Init says whom it
// waits for on standard error (or opts.Logger), after 4 s and every 10 s;
// at the timeout it names the ranks that never registered in the store,
// or, when all did, those it could not connect to.
//
// What it does to the process, and how to turn each off:
//   - GOCOMM_BIND (unset by default: nothing) binds the process to CPUs,
//     auto by local rank or a CPU list; GOMAXPROCS then follows the bound
//     CPUs, and with auto and more local ranks than CPUs it becomes the
//     rank's share of them. Init leaves GOMAXPROCS alone when the program
//     chose it (the GOMAXPROCS variable, or runtime.GOMAXPROCS called
//     before Init); leave GOCOMM_BIND unset to bind nothing.
//   - Settling: in a world of several ranks Init's last step keeps the
//     calling goroutine busy on its CPU for a while (the backend's choice:
//     20ms on the native backend when its shared-memory waits keep their
//     CPU, 10ms on mpi; else none), so that the Go runtime's monitor has
//     calmed down before the first operations run. GOCOMM_SETTLE sets
//     the time; GOCOMM_SETTLE=0 turns it off.
//   - In a world of several ranks a goroutine polls the store for other
//     ranks' failure reports (the flight recorder's exchange) until
//     Close. The comms logger, the flight recorder's HTTP endpoint and
//     its SIGUSR1 dump run only when asked for (Options.Profile,
//     Options.DebugAddr, Options.FlightRecorderSignal, or their
//     variables).
func Init(ctx context.Context, opts Options) (*Comm, error) {
	if ctx == nil {
		return nil, errNilContext("Init")
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if opts.Size == 0 && getenv(env.EnvJoin) == "1" {
		// A replacement started by an elastic launcher.
		return Join(ctx, opts)
	}
	cfg, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	// The program chose GOMAXPROCS unless the variable is unset and the
	// value is still the startup default.
	procsChosen := os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) != runtime.NumCPU()
	if cfg.sharedProcs > 0 && !procsChosen {
		runtime.GOMAXPROCS(cfg.sharedProcs)
	}
	if cfg.bindCPUs != nil {
		if err := cpubind.Apply(cfg.bindCPUs); err != nil {
			return nil, fmt.Errorf("comm: rank %d of %d: %w", cfg.rank, cfg.size, err)
		}
		// The runtime would lower GOMAXPROCS to the bound CPUs within a
		// second or so; meanwhile more Ps than CPUs put runtime threads
		// beside the rank's spinning one and stretch its tail latency.
		// Unless the program chose GOMAXPROCS, follow the binding now.
		if !procsChosen {
			runtime.SetDefaultGOMAXPROCS()
		}
		if cfg.logger != nil {
			cfg.logger.Debug("comm: bound to CPUs", "local_rank", cfg.localRank, "local_size", cfg.localSize, "cpus", cpubind.Format(cfg.bindCPUs))
		}
	}
	// Joining is bounded by the timeout even when ctx allows longer (a
	// rank that cannot reach a peer must say so, not wait for ctx).
	ctx, cancel := context.WithTimeout(ctx, cfg.initTimeout)
	defer cancel()
	var report *initReport
	if cfg.size > 1 && !cfg.ownBootstrap {
		report = startInitReport(ctx, &cfg, opts.Logger)
		defer report.stop()
	}
	store, own := opts.Store, false
	if store == nil && cfg.size > 1 && !cfg.ownBootstrap {
		// The meeting place package env chose: rank 0's TCP store,
		// torchrun's agent store (namespaced per restart attempt) or a
		// file store.
		if store, err = cfg.openStore(ctx); err != nil {
			return nil, err
		}
		own = true
	}
	var joined *joiner
	if store != nil && cfg.size > 1 && !cfg.ownBootstrap {
		// Every rank checks that all agree on the world before any
		// connects (join.go). A backend with its own bootstrap (MPI)
		// learns the world from its launcher and ignores the store.
		joined = newJoiner(store, &cfg)
		report.enter(phaseJoin, joined)
		if err := joined.join(ctx); err != nil {
			if own {
				var verdict *verdictError
				if errors.As(err, &verdict) && cfg.rank == 0 {
					linger(store)
				}
				store.Close()
			}
			return nil, err
		}
		report.enter(phaseConnect, joined)
	}
	bcfg := backend.Config{
		Rank: cfg.rank, Size: cfg.size,
		LocalRank: cfg.localRank, LocalSize: cfg.localSize,
		Store: store, Timeout: cfg.timeout, Secret: cfg.secret,
		ListenHost: cfg.listenHost, Algorithms: cfg.algorithms, Logger: cfg.logger,
		Transport: cfg.transport,
	}
	bcfg.Transport.Interface = cfg.socketIfname
	storeAddr := cfg.rdzv.Addr
	if len(cfg.rdzv.Endpoints) > 0 {
		storeAddr = cfg.rdzv.Endpoints[0] // etcd: the route to it finds this rank's address
	}
	bcfg.Transport.MasterHost, _, _ = net.SplitHostPort(storeAddr)
	local := cfg.storeLocal
	if la, ok := store.(interface{ LocalAddr() net.Addr }); ok && local == nil {
		local = la.LocalAddr()
	}
	if ta, ok := local.(*net.TCPAddr); ok {
		bcfg.Transport.StoreLocalIP = ta.IP.String()
	}
	be, err := backend.Open(ctx, cfg.backend, bcfg)
	if err != nil {
		if own {
			store.Close()
		}
		return nil, fmt.Errorf("comm: rank %d of %d: opening backend %q: %w", cfg.rank, cfg.size, cfg.backend, err)
	}
	if joined != nil {
		report.stop()
		// Tells the others' progress reports that this rank is connected.
		store.Set(ctx, joinUpKey(cfg.rank), nil)
	}
	c := newWorld(be, cfg.timeout, cfg.logger)
	c.prof = newProfiler(cfg.profiling, c.rank)
	c.local.rank, c.local.size = cfg.localRank, cfg.localSize
	if li, ok := be.(backend.LocalInfo); ok {
		c.local.rank, c.local.size = li.Local()
	}
	c.store, c.ownStore = store, own
	c.backendName = cfg.backend
	c.shrink.init(cfg.backend, bcfg, cfg.profiling)
	if err := c.startFlight(opts); err != nil {
		c.Close()
		return nil, err
	}
	if c.size > 1 {
		settle(settleTime(cfg, be))
	}
	return c, nil
}

func newWorld(be backend.Comm, timeout time.Duration, log *slog.Logger) *Comm {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Comm{be: be, id: 1, timeout: timeout, log: log, rank: be.Rank(), size: be.Size()}
	c.inline, _ = be.(backend.Inliner)
	c.global = make([]int, c.size)
	for i := range c.global {
		c.global[i] = i
	}
	c.local.size = c.size
	c.local.rank = c.rank
	c.attachFlight()
	return c
}

// NewLocalWorld returns a world of n ranks inside this process, connected by
// in-memory channels: for tests and for programs that want collectives
// among goroutines. Each *Comm is used by its own goroutine(s). It opens
// the world through the driver Options.Backend names ("" is "native"),
// which must be a backend.LocalOpener; it reads no environment, and of
// Options it uses Backend, Timeout, Algorithms, Logger and Profile.
func NewLocalWorld(n int, opts Options) ([]*Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: NewLocalWorld: size %d, want >= 1", ErrInvalid, n)
	}
	timeout := opts.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < 0:
		return nil, fmt.Errorf("%w: NewLocalWorld: Timeout %v, want > 0 (or 0 for DefaultTimeout)", ErrInvalid, timeout)
	}
	prof, err := profileConfig(opts.Profile, nil)
	if err != nil {
		return nil, err
	}
	name := cmp.Or(opts.Backend, "native")
	bes, err := backend.OpenLocal(name, n, backend.Config{Size: n, Timeout: timeout, Algorithms: opts.Algorithms, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("comm: NewLocalWorld: %w", err)
	}
	if len(bes) != n {
		for _, be := range bes {
			be.Close()
		}
		return nil, fmt.Errorf("comm: NewLocalWorld: backend %q opened %d ranks, want %d", name, len(bes), n)
	}
	world := make([]*Comm, n)
	for i, be := range bes {
		world[i] = newWorld(be, timeout, opts.Logger)
		world[i].backendName = name
		world[i].prof = newProfiler(prof, i)
	}
	return world, nil
}

// The accessors below answer for a nil *Comm as for a group this rank is
// not a member of (Rank -1, Size 0, IsMember false, ...); every method
// that returns an error returns one for it, wrapping ErrInvalid.

// Rank is this process's rank in the communicator, or -1 if it is not a
// member (a group this rank does not belong to).
func (c *Comm) Rank() int {
	if c == nil {
		return -1
	}
	return c.rank
}

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int {
	if c == nil {
		return 0
	}
	return c.size
}

// LocalRank is this process's rank among the ranks on its host.
func (c *Comm) LocalRank() int {
	if c == nil {
		return -1
	}
	return c.root().local.rank
}

// LocalSize is the number of ranks on this host.
func (c *Comm) LocalSize() int {
	if c == nil {
		return 0
	}
	return c.root().local.size
}

// IsMember reports whether this rank belongs to the communicator.
func (c *Comm) IsMember() bool { return c != nil && c.be != nil }

// GlobalRank translates a rank of this communicator into a world rank.
func (c *Comm) GlobalRank(r int) (int, error) {
	if err := c.made("GlobalRank"); err != nil {
		return -1, err
	}
	if r < 0 || r >= c.size {
		return -1, fmt.Errorf("%w: GlobalRank(%d): rank out of range [0,%d)", ErrInvalid, r, c.size)
	}
	return c.global[r], nil
}

// GroupRank translates a world rank into this communicator's rank, or -1 if
// that rank is not a member.
func (c *Comm) GroupRank(world int) int {
	if c == nil {
		return -1
	}
	for i, g := range c.global {
		if g == world {
			return i
		}
	}
	return -1
}

// Ranks lists the world ranks of the communicator's members in rank order.
func (c *Comm) Ranks() []int {
	if c == nil {
		return nil
	}
	return append([]int(nil), c.global...)
}

// Store returns the rendezvous store the world was built on (nil for
// NewLocalWorld and for a world of one).
func (c *Comm) Store() rendezvous.Store {
	if c == nil {
		return nil
	}
	return c.root().store
}

func (c *Comm) root() *Comm {
	if c.world != nil {
		return c.world
	}
	return c
}

// Close releases the communicator. Closing the world closes its groups and
// its connections; operations still pending fail with ErrClosed. Close is
// idempotent. Closing a nil *Comm or a zero Comm is an error wrapping
// ErrInvalid.
func (c *Comm) Close() error {
	if err := c.made("Close"); err != nil {
		return err
	}
	if c.closed.Swap(true) {
		return nil
	}
	defer c.opCtxs.Close()
	if c.be == nil {
		return nil
	}
	var err error
	if c.world == nil {
		err = c.closeSummary() // the comms logger's report, if the program made none
	}
	if c.flight != nil {
		// Before the store closes: the watcher uses it.
		c.flight.stopWatcher()
		err = errors.Join(err, c.flight.stopDebug())
	}
	err = errors.Join(err, c.be.Close())
	c.mu.Lock()
	own := c.ownStore
	c.mu.Unlock()
	if own && c.store != nil {
		// The master's store serves the others until they are gone too;
		// closing it early would only hurt ranks still in their own Close.
		err = errors.Join(err, c.store.Close())
	}
	if st := c.shrink.takeOwned(); st != nil {
		err = errors.Join(err, st.Close()) // the store a shrunk world inherited
	}
	return err
}

// Abort fails every pending and future operation of the world, on every rank,
// with err (a nil err: ErrAborted). Use it when this rank cannot go on and
// the others must not wait. It does nothing on a nil *Comm or a group this
// rank is not a member of.
func (c *Comm) Abort(err error) {
	if c == nil || c.be == nil {
		return
	}
	if err == nil {
		err = fmt.Errorf("%w: Abort called with no cause", ErrAborted)
	}
	c.be.Abort(err)
}

// closedNow reports whether c or its world has been closed.
func (c *Comm) closedNow() bool {
	return c.closed.Load() || c.root().closed.Load()
}

// nextSeq reserves the sequence number of the next collective.
func (c *Comm) nextSeq() (uint64, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	return c.seq.Add(1), nil
}

// algorithmOf is a helper for option parsing.
func algorithmOf(s string) (algo.Algorithm, error) { return algo.ParseAlgorithm(s) }
