//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/turn"
)

func init() {
	backend.Register(Name, Driver{})
	backend.Register(FunneledName, Driver{Funneled: true})
}

var (
	_ backend.Driver       = Driver{}
	_ backend.Bootstrapper = Driver{}
	_ backend.Comm         = (*Comm)(nil)
	_ backend.Settler      = (*Comm)(nil)
)

// Available reports that this build has MPI: the driver is a
// backend.Bootstrapper comm.Init can use.
func (Driver) Available() bool { return Available() }

// Bootstrap is the package's Bootstrap, for comm.Init through
// backend.Bootstrapper: every rank of MPI_COMM_WORLD calls it and learns
// where rank 0's TCP store will be.
func (Driver) Bootstrap(ctx context.Context, listenHost string) (backend.BootstrapInfo, error) {
	info, err := Bootstrap(ctx, listenHost)
	return backend.BootstrapInfo(info), err
}

// Bounds on MPI_Finalize when the world closes: a healthy world waits for
// every rank to close too (up to the configured timeout); a failed one
// gives up sooner, since some rank may never get there.
const failedFinalizeWait = 10 * time.Second

// Open joins MPI_COMM_WORLD (initialising MPI on first use) and returns a
// world communicator over a duplicate of it. Every rank must call Open.
// cfg.Store is not used. Rank and size are MPI's; a cfg.Size above 1 that
// disagrees with MPI is an error.
func (d Driver) Open(ctx context.Context, cfg backend.Config) (backend.Comm, error) {
	want := C.int(C.MPI_THREAD_MULTIPLE)
	if d.Funneled {
		want = C.MPI_THREAD_FUNNELED
	}
	blocking, err := parseBlocking(os.Getenv(EnvBlockingMax))
	if err != nil {
		return nil, err
	}
	if err := proc.acquire(want); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	w := &world{
		p:         &proc,
		funneled:  d.Funneled || proc.provided < int(C.MPI_THREAD_MULTIPLE),
		timeout:   timeout,
		log:       log,
		failed:    make(chan struct{}),
		blocking:  blocking,
		stopWatch: make(chan struct{}),
	}
	var rank, size C.int
	w.do(func() { C.gc_world_rank_size(&rank, &size) })
	w.rank, w.size = int(rank), int(size)
	if cfg.Size > 1 && (cfg.Size != w.size || cfg.Rank != w.rank) {
		proc.release(failedFinalizeWait)
		return nil, fmt.Errorf("comm: mpi backend: the configuration says rank %d of %d but MPI_COMM_WORLD says rank %d of %d: start every rank with mpirun/srun and let Init take rank and size from the launcher (or from MPI)",
			cfg.Rank, cfg.Size, w.rank, w.size)
	}
	var comm, mb, ab C.MPI_Comm
	var rc, lrank, lsize C.int
	w.do(func() {
		rc = C.gc_world_open(&comm, &mb, &ab)
		if rc == C.MPI_SUCCESS {
			rc = C.gc_local(comm, &lrank, &lsize)
		}
	})
	if err := mpiError("MPI_Comm_dup/MPI_Comm_split_type", rc); err != nil {
		proc.release(failedFinalizeWait)
		return nil, err
	}
	w.localRank, w.localSize = int(lrank), int(lsize)
	if err := w.learnHosts(comm); err != nil { // hosts.go
		proc.release(failedFinalizeWait)
		return nil, err
	}
	w.abortComm = ab
	if err := w.postAbortRecv(); err != nil {
		proc.release(failedFinalizeWait)
		return nil, err
	}
	c := newComm(w, comm, mb, w.rank, w.size, true)
	c.worldRanks = make([]int, w.size)
	for r := range c.worldRanks {
		c.worldRanks[r] = r
	}
	w.comms = append(w.comms, c)
	if !w.funneled {
		go w.watch(w.stopWatch)
	}
	log.Debug("mpi backend: world open", "mpi_rank", w.rank, "size", w.size,
		"thread_level", threadLevel(proc.provided), "funneled", w.funneled, "owner", proc.owner)
	return c, nil
}

// Kinds of abort notices.
const (
	noticeAbort  = 1 // the sender aborted the world
	noticeClosed = 2 // the sender closed its world with operations pending
	noticeLen    = 512
)

// world is what a world communicator and its groups share: the way MPI is
// called, the failure state, and the abort channel.
type world struct {
	p                    *process
	funneled             bool // every MPI call on the MPI thread
	rank, size           int
	localRank, localSize int   // among the ranks sharing this host
	hostLeader           []int // world rank -> lowest world rank on its host (hosts.go)
	timeout              time.Duration
	log                  *slog.Logger
	blocking             blockingPolicy // which collectives use the blocking MPI function
	stopWatch            chan struct{}  // closed by Close: the watchdog (watch) ends
	abortComm            C.MPI_Comm
	abortReq             *request       // receive of the first abort notice
	abortBuf             unsafe.Pointer // C memory, noticeLen bytes

	abortMu   sync.Mutex // serialises tests of abortReq (MPI forbids concurrent ones); protects abortDone
	abortDone bool       // abortReq completed or was cancelled
	// lastAbortPoll is when an operation's start last looked for abort
	// notices (clock.Nanos); looking costs an MPI_Test, so starts look
	// at most every startAbortPoll.
	lastAbortPoll atomic.Int64

	failedFlag atomic.Bool // err != nil, for the polling loops

	// Lock order: noticeMu, then (on the MPI thread, for funnelled worlds)
	// mu. Nothing waits for the MPI thread while holding mu.
	noticeMu sync.Mutex // protects released and notices
	released bool       // Close has freed the world's MPI objects: no more notices
	notices  []*request // abort notices sent

	mu     sync.Mutex // protects the fields below
	err    error      // why the world failed; nil while healthy
	closed bool       // Close was called
	comms  []*Comm    // the world and its open groups
	failed chan struct{}
}

// do runs f where this world may call MPI: here, or on the MPI thread.
func (w *world) do(f func()) {
	if w.funneled {
		w.p.onThread(f)
		return
	}
	f()
}

// failure is why the world failed, or nil.
func (w *world) failure() error {
	if !w.failedFlag.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// setFailure records err as the world's failure unless it failed already,
// and reports whether it did.
func (w *world) setFailure(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false
	}
	w.err = err
	w.failedFlag.Store(true)
	close(w.failed)
	return true
}

// abort fails the world with cause and tells the other ranks.
func (w *world) abort(cause error) {
	if w.setFailure(&core.AbortError{Cause: cause}) {
		w.notify(noticeAbort, cause.Error())
	}
}

// notify sends an abort notice to every other rank without waiting.
func (w *world) notify(kind byte, reason string) {
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	if w.released {
		return
	}
	msg := append([]byte{kind}, reason...)
	if len(msg) > noticeLen {
		msg = msg[:noticeLen]
	}
	for peer := 0; peer < w.size; peer++ {
		if peer == w.rank {
			continue
		}
		r, err := newRequest(0)
		if err != nil {
			return
		}
		buf := C.CBytes(msg) // freed never: tiny, and MPI may hold it until the end
		var rc C.int
		w.do(func() {
			rc = C.gc_isend(buf, C.int(len(msg)), dtypeCode(core.Byte), C.int(peer), 0, w.abortComm, r.c)
		})
		if rc != C.MPI_SUCCESS {
			w.log.Warn("mpi backend: could not send an abort notice", "peer", peer, "err", mpiError("MPI_Isend", rc))
			continue
		}
		w.notices = append(w.notices, r)
	}
}

func (w *world) postAbortRecv() error {
	r, err := newRequest(0)
	if err != nil {
		return err
	}
	w.abortBuf = C.malloc(noticeLen)
	var rc C.int
	w.do(func() {
		rc = C.gc_irecv(w.abortBuf, noticeLen, dtypeCode(core.Byte), -1, 0, w.abortComm, r.c)
	})
	if err := mpiError("MPI_Irecv", rc); err != nil {
		r.release()
		return err
	}
	w.abortReq = r
	return nil
}

// pollAbort checks, without blocking, whether another rank sent an abort
// notice, and fails the world if so. Call it where MPI may be called.
func (w *world) pollAbort() {
	if !w.abortMu.TryLock() {
		return // another goroutine is looking
	}
	defer w.abortMu.Unlock()
	if w.abortDone || w.abortReq == nil {
		return
	}
	rc := C.gc_test(w.abortReq.c)
	if rc < 0 {
		return
	}
	w.abortDone = true
	if err := mpiError("MPI_Test", rc); err != nil {
		w.setFailure(&core.AbortError{Cause: fmt.Errorf("receiving abort notices: %w", err)})
		return
	}
	peer := int(C.gc_source(w.abortReq.c))
	n := int(C.gc_bytes(w.abortReq.c))
	msg := C.GoBytes(w.abortBuf, C.int(max(n, 0)))
	var err error
	switch {
	case len(msg) > 0 && msg[0] == noticeClosed:
		err = &core.AbortError{Cause: &core.PeerError{Peer: peer, Err: core.ErrPeerClosed}}
	case len(msg) > 0:
		err = &core.RemoteAbortError{Peer: peer, Reason: string(msg[1:])}
	default:
		err = &core.RemoteAbortError{Peer: peer, Reason: "(no reason given)"}
	}
	w.setFailure(err)
}

// Comm is an MPI communicator: a world (a duplicate of MPI_COMM_WORLD) or
// a group of it. Run is safe for concurrent use.
type Comm struct {
	w          *world
	comm       C.MPI_Comm // collectives and point to point
	mbComm     C.MPI_Comm // monitored barriers (their tags would clash with the user's)
	rank, size int
	isWorld    bool
	worldRanks []int // communicator rank -> world rank

	turn turn.Turn // collectives start in sequence-number order

	gate gate // operations inside Run; closed by Close

	blk blockedCall // the blocking MPI call in progress, for the watchdog

	pace pace // passes through the Go scheduler between MPI calls
}

func newComm(w *world, comm, mb C.MPI_Comm, rank, size int, isWorld bool) *Comm {
	return &Comm{
		w: w, comm: comm, mbComm: mb, rank: rank, size: size, isWorld: isWorld,
		gate: gate{closedCh: make(chan struct{})},
	}
}

// Rank is this rank in the communicator (MPI_Comm_rank).
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator (MPI_Comm_size).
func (c *Comm) Size() int { return c.size }

// Local returns this process's rank among the world's ranks on its host,
// and their number, as MPI sees them (MPI_COMM_TYPE_SHARED), for any
// communicator of the world.
func (c *Comm) Local() (rank, size int) { return c.w.localRank, c.w.localSize }

// settleTime is how long comm.Init keeps a rank of this backend busy once
// set up (backend.Settler): each collective is a cgo call, which the Go
// runtime treats as a system call, and a call that outlasts a monitor poll
// on a rank with one P has its P taken back, which restarts the monitor's
// 20-us polling (pace.go); a rank that starts its first operations in that
// phase keeps restarting it, and its small collectives' mean time is
// several times their median until it settles. 10 ms of settling costs
// Init that much and removes the difference (docs/performance.md).
const settleTime = 10 * time.Millisecond

// SettleTime is backend.Settler's: see settleTime.
func (c *Comm) SettleTime() time.Duration { return settleTime }

// do runs f where this communicator may call MPI.
func (c *Comm) do(f func()) { c.w.do(f) }

func (c *Comm) opErr(req *backend.Request, peer int, err error) error {
	return &core.OpError{Op: req.Kind, Rank: c.rank, Peer: peer, Seq: req.Seq, Err: err}
}

// Run performs req on MPI. Collectives start in req.Seq order.
func (c *Comm) Run(ctx context.Context, req *backend.Request) error {
	if !c.gate.enter() {
		return c.opErr(req, -1, core.ErrClosed)
	}
	defer c.gate.leave()
	if err := c.w.failure(); err != nil {
		return c.opErr(req, -1, err)
	}
	switch req.Kind {
	case core.KindSend:
		return c.send(ctx, req)
	case core.KindRecv:
		if req.UpTo {
			return c.recvUpTo(ctx, req)
		}
		return c.recv(ctx, req)
	case core.KindMonitoredBarrier:
		return c.monitoredBarrier(ctx, req)
	}
	return c.collective(ctx, req)
}

// waitTurn waits until every collective with a smaller sequence number has
// been started on this communicator. Seq 0 does not wait.
func (c *Comm) waitTurn(ctx context.Context, seq uint64) error {
	err := c.turn.Wait(ctx, seq, c.w.failed, c.gate.closedCh, core.ErrClosed)
	if err == turn.ErrFailed {
		err = c.w.failure()
	}
	return err
}

// advance lets the collective after seq start.
func (c *Comm) advance(seq uint64) { c.turn.Advance(seq) }

// Group returns the communicator of members (ranks of c, in their new
// order), made with MPI_Comm_create_group, which only the members call.
// It blocks inside MPI until every member has called it: ctx is not
// honoured there (the comm package calls it right after an all-gather
// that every member passed).
func (c *Comm) Group(ctx context.Context, members []int, id uint64) (backend.Comm, error) {
	mine := -1
	seen := make(map[int]bool, len(members))
	for i, m := range members {
		if m < 0 || m >= c.size || seen[m] {
			return nil, fmt.Errorf("comm: mpi backend: group member %d out of range [0,%d) or repeated", m, c.size)
		}
		seen[m] = true
		if m == c.rank {
			mine = i
		}
	}
	if mine < 0 {
		return nil, fmt.Errorf("comm: mpi backend: this rank (%d) is not among the group members %v", c.rank, members)
	}
	if !c.gate.enter() {
		return nil, core.ErrClosed
	}
	defer c.gate.leave()
	if err := c.w.failure(); err != nil {
		return nil, err
	}
	ints := (*C.int)(C.malloc(C.size_t(len(members)) * C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(ints))
	for i, m := range members {
		unsafe.Slice(ints, len(members))[i] = C.int(m)
	}
	tag := C.int(id % uint64(c.w.p.tagUB))
	var comm, mb C.MPI_Comm
	var rc, rank, size C.int
	c.do(func() {
		rc = C.gc_group_open(c.comm, ints, C.int(len(members)), tag, &comm, &mb)
		if rc == C.MPI_SUCCESS {
			C.gc_rank_size(comm, &rank, &size)
		}
	})
	if err := mpiError("MPI_Comm_create_group", rc); err != nil {
		return nil, err
	}
	if int(rank) != mine || int(size) != len(members) {
		return nil, fmt.Errorf("comm: mpi backend: MPI made this rank %d of %d in the group, expected %d of %d", rank, size, mine, len(members))
	}
	g := newComm(c.w, comm, mb, mine, len(members), false)
	g.worldRanks = make([]int, len(members))
	for i, m := range members {
		g.worldRanks[i] = c.worldRanks[m]
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if c.w.closed {
		return nil, core.ErrClosed
	}
	c.w.comms = append(c.w.comms, g)
	return g, nil
}

// Abort fails every pending and later operation of the world, on every
// rank, with err (wrapped so that it matches core.ErrAborted). The
// other ranks learn of it through a message, not MPI_Abort: their
// processes keep running and their operations return errors.
func (c *Comm) Abort(err error) {
	if err == nil {
		err = errors.New("aborted")
	}
	c.w.abort(err)
}

// Close releases the communicator; pending operations fail with
// core.ErrClosed. Closing the world closes its groups, tells the other
// ranks if operations were still pending, and, for the last world of the
// process, finalises MPI (which waits for the other ranks to close too).
// Close is idempotent.
func (c *Comm) Close() error {
	if !c.isWorld {
		return c.closeGroup()
	}
	w := c.w
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	comms := append([]*Comm(nil), w.comms...)
	w.mu.Unlock()
	pending := 0
	for _, x := range comms {
		pending += max(x.gate.close(), 0)
	}
	healthy := w.failure() == nil
	if healthy && pending > 0 {
		w.notify(noticeClosed, "closed")
	}
	w.setFailure(core.ErrClosed)
	for _, x := range comms {
		x.gate.wait()
	}
	close(w.stopWatch)
	// Nothing of this world calls MPI any more.
	w.noticeMu.Lock()
	w.released = true
	w.noticeMu.Unlock()
	w.do(func() {
		w.abortMu.Lock()
		defer w.abortMu.Unlock()
		if !w.abortDone {
			C.gc_cancel(w.abortReq.c)
			for i := 0; i < 1000 && C.gc_test(w.abortReq.c) < 0; i++ {
				time.Sleep(time.Millisecond)
			}
			w.abortDone = true
		}
		for _, r := range w.notices {
			C.gc_test(r.c)
		}
		if healthy && pending == 0 { // abandoned operations may still use them
			for _, x := range comms {
				C.gc_free(&x.comm)
				C.gc_free(&x.mbComm)
			}
			C.gc_free(&w.abortComm)
		}
	})
	bound := w.timeout
	if !healthy {
		bound = failedFinalizeWait
	}
	return proc.release(bound)
}

func (c *Comm) closeGroup() error {
	if c.gate.close() < 0 {
		return nil // closed before
	}
	c.gate.wait()
	w := c.w
	w.mu.Lock()
	for i, x := range w.comms {
		if x == c {
			w.comms = append(w.comms[:i], w.comms[i+1:]...)
			break
		}
	}
	w.mu.Unlock()
	// Holding noticeMu keeps the world's Close from finalising meanwhile.
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	if w.released || w.failure() != nil {
		return nil // the world is gone or broken: leave the communicator to MPI_Finalize
	}
	w.do(func() {
		C.gc_free(&c.comm)
		C.gc_free(&c.mbComm)
	})
	return nil
}

// gate counts the operations inside a communicator, so that Close can wait
// for them to leave MPI before freeing what they use. Entering and
// leaving are one atomic addition each (every operation does both).
type gate struct {
	// state is the number of operations inside, plus gateClosed once
	// the gate is closed: an operation that enters a closed gate leaves
	// at once, and the one that leaves it empty signals idle.
	state      atomic.Int64
	closedFlag atomic.Bool // closed, for the polling loops

	mu       sync.Mutex    // protects idle
	idle     chan struct{} // made by close when operations are inside; closed once none is
	closedCh chan struct{} // closed by close
}

const gateClosed = 1 << 40

func (g *gate) enter() bool {
	if g.state.Add(1)&gateClosed != 0 {
		g.leave()
		return false
	}
	return true
}

func (g *gate) leave() {
	if g.state.Add(-1) == gateClosed {
		g.mu.Lock()
		if g.idle != nil {
			close(g.idle)
			g.idle = nil
		}
		g.mu.Unlock()
	}
}

// close shuts the gate and returns how many operations are inside, or -1
// if it was closed already.
func (g *gate) close() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closedFlag.Load() {
		return -1
	}
	g.closedFlag.Store(true)
	close(g.closedCh)
	n := g.state.Add(gateClosed) - gateClosed
	if n > 0 {
		g.idle = make(chan struct{})
	}
	return int(n)
}

// wait returns once no operation is inside.
func (g *gate) wait() {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	if idle != nil {
		<-idle
	}
}
