package comm

// The flight recorder: every communicator keeps a ring of its recent
// operations (what, how big, with whom, when it was entered and left, how
// it ended), as torch's NCCL flight recorder does. Work.execute is the one
// place operations enter and leave; recording costs two clock reads, an
// uncontended lock on entry and one plain store on exit, and allocates
// nothing. The rings are read by
// FlightRecord, the SIGUSR1 dump and the debug HTTP endpoint (debughttp.go),
// and by the exchange that explains a timeout (flightexchange.go).

import (
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/clock"
	"github.com/gocomm/comm/internal/release"
)

// flightRingSize is how many recent operations a communicator remembers.
const flightRingSize = 128

// flightState is how far an operation got.
type flightState uint8

const (
	flightPending flightState = iota + 1 // entered, not yet left
	flightDone                           // left without an error
	flightFailed                         // left with an error
)

func (s flightState) String() string {
	switch s {
	case flightPending:
		return "pending"
	case flightDone:
		return "done"
	case flightFailed:
		return "failed"
	}
	return "unknown"
}

// flightEntry is one operation in a ring.
type flightEntry struct {
	ord        uint64 // 1 + the number of operations entered before it
	seq        uint64
	kind       core.Kind
	dtype      core.DType
	op         core.Op
	root, peer int32
	send, recv int64 // buffer sizes in bytes
	// enter and exit are offsets from clock.Base: internal/clock reads
	// the CPU's counter where it can, a fraction of time.Since's cost on
	// virtual machines, and every operation reads it twice.
	enter time.Duration
	// end says how the operation left, once it has: exit writes it, without
	// the lock, as one word (flightEnd), which snapshot reads atomically.
	// A word left by an earlier operation in the slot does not match the
	// slot's ord.
	end uint64
	err error // a failed operation's error, set under mu before end
	// An object collective (kind core.KindObject: package object, entered
	// by enterObject, not by enterOp) has a name and the sequence numbers
	// its pieces took on the communicator, lastSeq set when it leaves.
	// Other entries leave these stale: they are read for that kind only.
	name              string
	firstSeq, lastSeq uint64
}

// flightEnd packs how an operation left: its state (2 bits), the low 8
// bits of its ord's turn around the ring (so that an end word left by an
// operation the ring has since overwritten is told apart) and the time it
// took, in nanoseconds (54 bits: 208 days).
func flightEnd(ord uint64, state flightState, took time.Duration) uint64 {
	return uint64(max(took, 0))<<10 | (ord/flightRingSize&0xff)<<2 | uint64(state)
}

// ended returns the state and exit time of e, as its end word says, or
// flightPending.
func (e *flightEntry) ended() (flightState, time.Duration) {
	end := atomic.LoadUint64(&e.end)
	if end&3 == 0 || end>>2&0xff != e.ord/flightRingSize&0xff {
		return flightPending, 0
	}
	return flightState(end & 3), e.enter + time.Duration(end>>10)
}

// flightTicket is what exit needs of an entered operation.
type flightTicket struct {
	ord   uint64
	enter time.Duration
}

// flightRecorder is one communicator's ring.
type flightRecorder struct {
	id     uint64
	rank   int   // this rank in the communicator
	global []int // communicator rank -> world rank; read-only
	base   time.Time

	mu      sync.Mutex // protects following (entries' end words: see there)
	ring    [flightRingSize]flightEntry
	n       uint64 // operations entered
	lastSeq uint64 // highest collective sequence number entered
	// retired counts the completed operations the ring no longer holds
	// (snapshot adds those it holds).
	retired flightTotals
}

// flightTotals counts completed operations and their payload bytes.
type flightTotals struct {
	sent      int64 // payload bytes of completed operations' send buffers
	received  int64 // and of their receive buffers
	completed uint64
}

func (t *flightTotals) add(e *flightEntry) {
	if st, _ := e.ended(); st == flightDone {
		t.sent += e.send
		t.received += e.recv
		t.completed++
	}
}

func newFlightRecorder(id uint64, rank int, global []int) *flightRecorder {
	return &flightRecorder{id: id, rank: rank, global: global, base: clock.Base()}
}

// enter records that req starts now and returns what exit needs.
func (r *flightRecorder) enter(req *backend.Request) flightTicket {
	root, peer := int32(-1), int32(-1)
	switch req.Kind {
	case core.KindReduce, core.KindBroadcast, core.KindGather, core.KindGatherV,
		core.KindScatter, core.KindScatterV:
		root = int32(req.Root)
	case core.KindSend, core.KindRecv:
		peer = int32(req.Peer)
	}
	return r.enterOp(&flightEntry{seq: req.Seq, kind: req.Kind, dtype: req.DType, op: req.Op,
		root: root, peer: peer, send: int64(len(req.Send)), recv: int64(len(req.Recv))})
}

// enterOp records that the operation op describes (its seq, kind, dtype,
// op, root, peer, send and recv) starts now, and returns what exit needs.
func (r *flightRecorder) enterOp(op *flightEntry) flightTicket {
	now := time.Duration(clock.Nanos())
	r.mu.Lock()
	r.n++
	ord := r.n
	e := &r.ring[ord%flightRingSize]
	r.retired.add(e)
	// end stays: it does not match ord (see flightEnd).
	release.Store64(&e.ord, ord) // exit reads it without the lock
	e.seq, e.kind, e.dtype, e.op = op.seq, op.kind, op.dtype, op.op
	e.root, e.peer, e.send, e.recv = op.root, op.peer, op.send, op.recv
	e.enter, e.err = now, nil
	r.lastSeq = max(r.lastSeq, op.seq)
	r.mu.Unlock()
	return flightTicket{ord: ord, enter: now}
}

// enterObject records that the object collective name (package object)
// starts now, its pieces from sequence number first on, and returns what
// exitObject needs. It has no sequence number of its own and moves no
// bytes of its own (its pieces count them).
func (r *flightRecorder) enterObject(name string, root int, first uint64) flightTicket {
	// enterOp's steps, with the fields only this kind has (enterOp, on
	// every operation's path, leaves them alone).
	now := time.Duration(clock.Nanos())
	r.mu.Lock()
	r.n++
	ord := r.n
	e := &r.ring[ord%flightRingSize]
	r.retired.add(e)
	release.Store64(&e.ord, ord)
	e.seq, e.kind, e.dtype, e.op = 0, core.KindObject, 0, 0
	e.root, e.peer, e.send, e.recv = int32(root), -1, 0, 0
	e.enter, e.err = now, nil
	e.name, e.firstSeq, e.lastSeq = name, first, 0
	r.mu.Unlock()
	return flightTicket{ord: ord, enter: now}
}

// exitObject records how the object collective t entered ended, the last
// sequence number its pieces took being last.
func (r *flightRecorder) exitObject(t flightTicket, last uint64, err error) {
	r.mu.Lock()
	if e := &r.ring[t.ord%flightRingSize]; e.ord == t.ord {
		e.lastSeq = last
	}
	r.mu.Unlock()
	r.exit(t, err)
}

// inlineRecord records a communicator's inline all-reduces in its flight
// recorder (backend.InlineRecorder: from inside the operation, entered
// while it waits for its peers). The turn the operation holds in its
// backend guards it: one operation at a time.
type inlineRecord struct {
	rec     *flightRecorder
	ticket  flightTicket
	entered bool
}

// InlineEntered implements backend.InlineRecorder.
func (ir *inlineRecord) InlineEntered(seq uint64, dt core.DType, op core.Op, n int) {
	ir.ticket = ir.rec.enterOp(&flightEntry{seq: seq, kind: core.KindAllReduce, dtype: dt, op: op,
		root: -1, peer: -1, send: int64(n), recv: int64(n)})
	ir.entered = true
}

// InlineExited implements backend.InlineRecorder.
func (ir *inlineRecord) InlineExited(seq uint64, dt core.DType, op core.Op, n int, err error) {
	if !ir.entered {
		// It failed before it posted (the board closed, say).
		ir.InlineEntered(seq, dt, op, n)
	}
	ir.entered = false
	ir.rec.exit(ir.ticket, err)
}

// exit records how the operation t entered as ended. An entry the ring has
// already overwritten (more than flightRingSize operations in flight) is
// forgotten.
//
// A success is one release store of the entry's end word, no lock: a lock
// is two uncontended atomic operations, each a full fence, a visible share
// of a small all-reduce over shared memory (docs/performance.md).
func (r *flightRecorder) exit(t flightTicket, err error) {
	// internal/clock may step back by microseconds when it corrects its
	// rate: never record a departure before the arrival (flightEnd).
	took := time.Duration(clock.Nanos()) - t.enter
	e := &r.ring[t.ord%flightRingSize]
	if err == nil {
		// An operation the ring has moved past leaves the slot's word to
		// the one there now (which may have ended already).
		if atomic.LoadUint64(&e.ord) == t.ord {
			release.Store64(&e.end, flightEnd(t.ord, flightDone, took))
		}
		return
	}
	r.mu.Lock()
	if e.ord == t.ord {
		e.err = err
		release.Store64(&e.end, flightEnd(t.ord, flightFailed, took))
	}
	r.mu.Unlock()
}

// FlightOp is one operation of a flight record.
type FlightOp struct {
	Seq       uint64    `json:"seq"` // the collective's sequence number; 0 for Send and Recv
	Op        string    `json:"op"`  // all_reduce, broadcast, send... (the comms logger's names)
	DType     string    `json:"dtype"`
	Reduce    string    `json:"reduce,omitempty"` // the reduction operator, for reductions
	Root      int       `json:"root"`             // rooted collectives' root, else -1
	Peer      int       `json:"peer"`             // Send and Recv's peer, else -1
	SendBytes int64     `json:"send_bytes"`
	RecvBytes int64     `json:"recv_bytes"`
	Entered   time.Time `json:"entered"`
	Exited    time.Time `json:"exited,omitzero"`
	State     string    `json:"state"` // pending, done or failed
	Error     string    `json:"error,omitempty"`
	// An object collective (package object; Op object.Broadcast...) has no
	// Seq: its pieces took FirstSeq to LastSeq (0 while it runs). A piece
	// of one names it in Part.
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	Part     string `json:"part,omitempty"`
}

// FlightComm is the flight record of one communicator.
type FlightComm struct {
	ID            uint64     `json:"id"`
	Rank          int        `json:"rank"`  // this process's rank in the communicator
	Ranks         []int      `json:"ranks"` // the members' world ranks, in communicator rank order
	Ops           uint64     `json:"ops"`   // operations entered so far
	Completed     uint64     `json:"completed"`
	LastSeq       uint64     `json:"last_seq"` // highest collective sequence number entered
	BytesSent     int64      `json:"bytes_sent"`
	BytesReceived int64      `json:"bytes_received"`
	Pending       []FlightOp `json:"pending"`
	Recent        []FlightOp `json:"recent"` // the last operations, oldest first (pending ones included)
}

// FlightRecord is a dump of the flight recorders of one world in this
// process: the world and the groups made from it.
type FlightRecord struct {
	Rank  int          `json:"rank"` // world rank
	Size  int          `json:"size"` // world size
	PID   int          `json:"pid"`
	Time  time.Time    `json:"time"`
	Comms []FlightComm `json:"comms"`
}

func (e *flightEntry) export(base time.Time) FlightOp {
	state, exit := e.ended()
	op := FlightOp{
		Seq: e.seq, Op: opName(e.kind), DType: e.dtype.String(), Root: int(e.root), Peer: int(e.peer),
		SendBytes: e.send, RecvBytes: e.recv, Entered: base.Add(e.enter).Round(0), State: state.String(),
	}
	if state != flightPending {
		op.Exited = base.Add(exit).Round(0)
	}
	if isReduction(e.kind) {
		op.Reduce = e.op.String()
	}
	if e.kind == core.KindObject {
		op.Op, op.FirstSeq, op.LastSeq = e.name, e.firstSeq, e.lastSeq
	}
	if state == flightFailed && e.err != nil {
		op.Error = e.err.Error()
	}
	return op
}

func isReduction(k core.Kind) bool {
	switch k {
	case core.KindAllReduce, core.KindReduce, core.KindReduceScatter, core.KindReduceScatterV:
		return true
	}
	return false
}

// snapshot copies the ring's last n operations (all when n <= 0).
func (r *flightRecorder) snapshot(n int) FlightComm {
	r.mu.Lock()
	defer r.mu.Unlock()
	tot := r.retired
	for i := range r.ring {
		tot.add(&r.ring[i]) // a slot never used has no end: not counted
	}
	fc := FlightComm{
		ID: r.id, Rank: r.rank, Ranks: slices.Clone(r.global), Ops: r.n, Completed: tot.completed,
		LastSeq: r.lastSeq, BytesSent: tot.sent, BytesReceived: tot.received,
		Pending: []FlightOp{}, Recent: []FlightOp{},
	}
	kept := min(r.n, flightRingSize)
	if n > 0 {
		kept = min(kept, uint64(n))
	}
	for ord := r.n - kept + 1; ord <= r.n; ord++ {
		e := &r.ring[ord%flightRingSize]
		if e.ord != ord {
			continue
		}
		op := e.export(r.base)
		fc.Recent = append(fc.Recent, op)
	}
	// Pending operations older than the kept window still matter.
	for i := range r.ring {
		e := &r.ring[i]
		if st, _ := e.ended(); e.ord != 0 && st == flightPending {
			fc.Pending = append(fc.Pending, e.export(r.base))
		}
	}
	slices.SortFunc(fc.Pending, func(a, b FlightOp) int { return a.Entered.Compare(b.Entered) })
	labelParts(fc.Recent, fc.Recent)
	labelParts(fc.Pending, fc.Recent)
	labelParts(fc.Pending, fc.Pending)
	return fc
}

// labelParts names in ops the object collective (among objs) each
// collective was a piece of: the one whose pieces' sequence numbers hold
// it (from its first on, while it runs).
func labelParts(ops, objs []FlightOp) {
	for _, o := range objs {
		if o.FirstSeq == 0 {
			continue
		}
		for i := range ops {
			s := ops[i].Seq
			if s >= o.FirstSeq && (s <= o.LastSeq || o.LastSeq == 0 && o.State == flightPending.String()) {
				ops[i].Part = o.Op
			}
		}
	}
}

// flightWorld holds the recorders of a world and of its groups, and the
// exchange state (flightexchange.go) and debug endpoints (debughttp.go)
// that serve them.
type flightWorld struct {
	rank, size int // world rank and size

	mu   sync.Mutex // protects recs
	recs []*flightRecorder

	exchange flightExchange
	debug    debugServer
}

func (f *flightWorld) add(r *flightRecorder) {
	f.mu.Lock()
	f.recs = append(f.recs, r)
	f.mu.Unlock()
}

func (f *flightWorld) recorders() []*flightRecorder {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.recs)
}

func (f *flightWorld) record(recent int) FlightRecord {
	fr := FlightRecord{Rank: f.rank, Size: f.size, PID: os.Getpid(), Time: time.Now()}
	for _, r := range f.recorders() {
		fr.Comms = append(fr.Comms, r.snapshot(recent))
	}
	return fr
}

// FlightRecorder is the flight recorder's handle on a communicator: every
// operation of its world (the world and every group made from it on this
// rank) is noted as it is entered and completed, so that a hang or a
// desynchronised rank can be diagnosed after the fact, from Snapshot, the
// debug HTTP endpoint (Options.DebugAddr, GOCOMM_DEBUG_ADDR), a signal
// (Options.FlightRecorderSignal) or the report of a failed operation. Get
// it with Comm.FlightRecorder; it is a view of the communicator, not a
// copy, and costs nothing to get. A nil communicator's answers are those
// of no world; a non-member's, those of its world.
type FlightRecorder Comm

// FlightRecorder returns the handle of c's world's flight recorder. It
// never allocates: the handle is c itself, seen as a *FlightRecorder.
func (c *Comm) FlightRecorder() *FlightRecorder { return (*FlightRecorder)(c) }

// Snapshot returns a copy of the flight recorders of the world: for each
// communicator, its last operations (up to 128) and those still pending,
// the highest sequence number entered, and the payload bytes of completed
// operations. It is safe to call at any time, from any goroutine; the
// result belongs to the caller.
func (r *FlightRecorder) Snapshot() FlightRecord {
	c := (*Comm)(r)
	var f *flightWorld
	if c != nil {
		f = c.root().flight
	}
	if f == nil {
		return FlightRecord{Rank: -1, PID: os.Getpid(), Time: time.Now()}
	}
	return f.record(0)
}

// attachFlight gives a new world its recorder set and c its recorder.
func (c *Comm) attachFlight() {
	c.flight = &flightWorld{rank: c.rank, size: c.size}
	c.rec = newFlightRecorder(c.id, c.rank, c.global)
	c.inlineRec.rec = c.rec
	c.flight.add(c.rec)
}

// attachGroupFlight gives a group made from a world its recorder.
func (g *Comm) attachGroupFlight() {
	if f := g.root().flight; f != nil && g.be != nil {
		g.rec = newFlightRecorder(g.id, g.rank, g.global)
		f.add(g.rec)
	}
}
