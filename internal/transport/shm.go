package transport

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/clock"
	"github.com/gocomm/comm/internal/cpubind"
)

// Shared-memory rings. The ranks of one host map one segment (a file in
// /dev/shm, unlinked once every rank has mapped it) holding, for every
// ordered pair of those ranks, a single-producer single-consumer byte ring.
// Segment layout (offsets in bytes, native byte order, every atomic word
// aligned):
//
//	0          segment header (one page): magic, version, local rank
//	           count, ring size, segment size, then the world rank of
//	           each local index (uint32 each)
//	4096       consumer blocks, one per local rank (256 bytes each):
//	             +0   sleepers  uint32  the rank's poller is (about to be) asleep
//	             +4   wake      uint32  futex the poller sleeps on; producers bump it
//	             +64  (unused)
//	             +68  drain     uint32  bumped to ask the rank's drainer to drain
//	             +128 closed    uint32  the rank closed its endpoint
//	             +192 pid       uint64  the rank's process id
//	             +200 probe     uint64  address of a word in the rank's memory
//	                                    holding probeValue(pid), for peers to
//	                                    test single-copy reads
//	...        ring controls, one per ordered pair (128 bytes each):
//	             +0   head      uint64  bytes the consumer has freed (consumer writes)
//	             +8   space     uint32  futex a producer waiting for room sleeps on
//	             +16  single    uint32  whether the consumer can read the producer's
//	                                    memory, so that single-copy records are
//	                                    welcome: 0 not known yet, 1 yes, 2 no
//	                                    (consumer writes)
//	             +64  waiting   uint32  the producer waits for room (producer writes)
//	page-aligned rings, RingBytes each: records.
//
// A record is a 64-byte header and its payload, padded to 64 bytes; it
// never wraps around the ring's end (a pad record fills the rest of the
// lap). Header:
//
//	 0  seq    uint64  absolute byte position of the record + 1; written
//	                   last (release), so the consumer polls this word only
//	 8  kind   uint8   first piece of a message, later piece, goodbye, pad
//	12  len    uint32  payload bytes in this record
//	16  Comm, Seq, Tag (uint64 each); 40 Sig.Kind, DType, Op, Algo (uint8
//	    each), Root (int32); 48 Sig.Count; 56 message length (uint64)
//
// Fields from 16 on are written only in a message's first record. A
// message longer than the chunk size travels as consecutive records
// written under the producer's lock, so messages never interleave in a
// ring, and the receiver copies each piece straight into the posted
// buffer. A goodbye record is the last a producer writes: the consumer
// sees it after every message before it.
//
// A single-copy record (kind single) carries a whole message that stays
// in the sender's memory: its payload is the message's address there
// (uint64), and the consumer copies the message straight from the
// sender's process into the receive's buffer (Linux cross-memory attach,
// process_vm_readv), one copy instead of two through the ring. The sender
// waits until the consumer has freed the record, which it does only after
// the copy. Producers write such records only to consumers that set the
// ring's single word, having read a probe word of the producer's memory
// at set-up.
const (
	shmMagic      = 0x4d48534d4f434f47 // "GOCOMSHM"
	shmVersion    = 5
	cacheLine     = 64
	shmPage       = 4096
	recHeader     = 64
	consBlockSize = 256
	ringCtlSize   = 128
	maxLocalRanks = (shmPage - 64) / 4

	defaultRingBytes  = 1 << 20
	minRingBytes      = 64 << 10
	defaultChunkBytes = 64 << 10
	// defaultSingleCopyBytes: when a host's ranks outnumber its CPUs,
	// from about here a copy out of the sender's process beats two copies
	// through a ring, whose two ends must run at once to stream. With a
	// CPU per rank the ring is the default: the sender's cache-bypassing
	// copy and the receiver's overlap, where the kernel's copy across
	// processes pins the sender's pages one by one, and the ring was
	// faster at every size measured (see docs/tuning.md,
	// GOCOMM_SHM_SINGLE_COPY).
	defaultSingleCopyBytes = 256 << 10
	// segmentBudget bounds a host's rings together: with many ranks on a
	// host the default ring size shrinks to stay near it.
	segmentBudget = 256 << 20

	// defaultSpinWait: a rank with a core of its own polls this long
	// before it yields. Each yield is a system call, and yields in the
	// middle of a stream of small collectives kept the Go runtime's
	// monitor waking on the rank's core, which stalled the peer past a
	// short spin and made it yield in turn. It trades a core's idle time
	// for the tail latency of small collectives (see docs/tuning.md).
	defaultSpinWait = 200 * time.Microsecond
	// oversubscribedStageSpin: a rank whose host's ranks outnumber its
	// CPUs spins this long in the stage's waits, between the chunks of
	// large collectives; its other waits poll for crowdedSpinWait. Without
	// it (yielding from the first empty poll) large broadcasts,
	// all-to-alls and all-gathers on crowded hosts were slower: the next
	// chunk often arrives within the spin.
	oversubscribedStageSpin = time.Microsecond
	defaultYieldWait        = time.Millisecond
	// maxSleep bounds one futex sleep, a safety net: every event that
	// matters wakes a sleeper explicitly.
	maxSleep = time.Second
	// drainPollMin and drainPollMax bound the period of the drainer's
	// looks at its drain word (drainLoop).
	drainPollMin = 500 * time.Microsecond
	drainPollMax = 10 * time.Millisecond
	// singlePatience is how long a single-copy send waits for its
	// receiver to come and copy the message into the receive's buffer
	// before it asks the receiver's drainer to copy it into a buffer of
	// its own (which costs a second copy, into fresh memory). A receiver
	// blocked in the transport (receiving, or sending itself) copies at
	// once; one still computing its side of a step needs a little time.
	singlePatience = 50 * time.Millisecond
)

// Values of a ring's single word: the consumer has not probed the
// producer yet (it does right after set-up), it can copy out of the
// producer's memory, or it cannot (or will not).
const (
	singleUndecided = 0
	singleYes       = 1
	singleNo        = 2
	// singleDecideWait bounds how long a sender waits for a peer that
	// has not probed it yet (right after set-up) before it sends through
	// the ring.
	singleDecideWait = 100 * time.Millisecond
)

// Values of a ring's waiting word.
const (
	waitRoom = 1 // the producer waits for room: drain the ring
	waitCopy = 2 // the producer waits for a single-copy receive, patiently
)

// Record kinds.
const (
	recFirst   = 1
	recMore    = 2
	recGoodbye = 3
	recPad     = 4
	recSingle  = 5
)

// SHMOptions tunes the shared-memory rings of a Hybrid endpoint. Zero
// values select the defaults; every rank of a host must use the same
// RingBytes (the segment's creator decides it).
type SHMOptions struct {
	// RingBytes is the capacity of the ring of each ordered pair of ranks
	// on a host: a power of two of at least 64 KiB. Default 1 MiB, halved
	// while the host's rings together would exceed 256 MiB.
	RingBytes int
	// ChunkBytes is the largest piece of a message in one ring record
	// (default 64 KiB, at most RingBytes/4). Larger messages stream
	// through the ring piece by piece.
	ChunkBytes int
	// SpinWait is how long a waiting rank polls before it starts yielding
	// its CPU (default 200µs, none when the host's ranks outnumber its
	// CPUs); YieldWait how long it polls between yields before it sleeps
	// on a futex (default 1ms). Negative disables the phase.
	SpinWait, YieldWait time.Duration
	// stageSpin is SpinWait for the stage's waits (withDefaults).
	stageSpin time.Duration
	// Areas sets aside room in the segment for shared-memory
	// collectives (see SegmentAreas).
	Areas SegmentAreas
	// SingleCopyBytes is the smallest message that the receiver copies
	// straight out of the sender's memory instead of through the ring
	// (where the kernel allows it: process_vm_readv between the ranks'
	// processes; Linux only). Default: none when every rank of the host
	// has a CPU of its own, else 256 KiB, or just above RingBytes/2 (the
	// largest send that completes inline) if that is less. Negative
	// disables single copy.
	// It only affects this rank's sends.
	SingleCopyBytes int
	// Stores is how a rank writes what its peers read next (rings, the
	// board, the stage; kernel.CopyShared): "cached" with plain copies,
	// "bypass" with stores that bypass the writer's cache, "auto" or ""
	// cached where the host's CPUs share one last-level cache
	// (cpubind.OneLastLevelCache), else bypass. The choice holds for the
	// whole process (kernel.SetCacheBypass), made when the segment is
	// attached.
	Stores string
	// Dir is the directory of the segment file (default /dev/shm, else
	// os.TempDir()). The file is removed as soon as every rank mapped it.
	Dir string
}

// withDefaults fills in the defaults for a host of nlocal ranks.
func (o SHMOptions) withDefaults(nlocal int) (SHMOptions, error) {
	if o.RingBytes == 0 {
		o.RingBytes = defaultRingBytes
		for pairs := nlocal * (nlocal - 1); o.RingBytes > minRingBytes && pairs*o.RingBytes > segmentBudget; {
			o.RingBytes /= 2
		}
	}
	if o.RingBytes < minRingBytes || o.RingBytes&(o.RingBytes-1) != 0 || o.RingBytes > 1<<30 {
		return o, fmt.Errorf("comm: transport: SHMOptions.RingBytes %d is not a power of two in [%d, %d]", o.RingBytes, minRingBytes, 1<<30)
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = min(defaultChunkBytes, o.RingBytes/4)
	}
	if o.ChunkBytes < 1 || o.ChunkBytes > o.RingBytes/4 {
		return o, fmt.Errorf("comm: transport: SHMOptions.ChunkBytes %d not in [1, RingBytes/4 = %d]", o.ChunkBytes, o.RingBytes/4)
	}
	// Ranks outnumber the host's cores: the peer waited for is often not
	// running.
	crowded := nlocal > cpubind.HostCPUs()
	if o.SingleCopyBytes == 0 {
		o.SingleCopyBytes = -1
		if crowded {
			o.SingleCopyBytes = min(defaultSingleCopyBytes, o.RingBytes/2+1)
		}
	}
	if o.SpinWait == 0 {
		o.SpinWait = defaultSpinWait
		o.stageSpin = defaultSpinWait
		if crowded {
			// Spinning only delays the peer.
			o.SpinWait, o.stageSpin = crowdedSpinWait(), oversubscribedStageSpin
		}
	} else {
		o.stageSpin = o.SpinWait
	}
	o.stageSpin = max(o.stageSpin, 0)
	if o.YieldWait == 0 {
		o.YieldWait = defaultYieldWait
	}
	o.SpinWait, o.YieldWait = max(o.SpinWait, 0), max(o.YieldWait, 0)
	if err := CheckSHMStores(o.Stores); err != nil {
		return o, err
	}
	if o.Stores == "" || o.Stores == "auto" {
		o.Stores = "bypass"
		if cpubind.OneLastLevelCache() {
			o.Stores = "cached"
		}
	}
	return o, nil
}

// CheckSHMStores says whether s is a valid SHMOptions.Stores.
func CheckSHMStores(s string) error {
	switch s {
	case "", "auto", "cached", "bypass":
		return nil
	}
	return fmt.Errorf("comm: transport: SHMOptions.Stores %q: want auto, cached or bypass", s)
}

// shmDirs are the directories tried for segment files, in order.
func shmDirs(dir string) []string {
	if dir != "" {
		return []string{dir}
	}
	return []string{"/dev/shm", os.TempDir()}
}

// shmLayout computes where things are in a segment.
type shmLayout struct {
	n         int // local ranks
	ringBytes int
	areas     SegmentAreas
}

func (l shmLayout) consBlock(j int) int { return shmPage + j*consBlockSize }

func (l shmLayout) pair(i, j int) int { return i*l.n + j }

func (l shmLayout) ringCtl(i, j int) int {
	return shmPage + l.n*consBlockSize + l.pair(i, j)*ringCtlSize
}

func (l shmLayout) ringsStart() int {
	return roundUp(shmPage+l.n*consBlockSize+l.n*l.n*ringCtlSize, shmPage)
}

// ring returns the offset of the ring from local i to local j (i != j).
// Rings are indexed over ordered pairs of distinct ranks.
func (l shmLayout) ring(i, j int) int {
	k := i*(l.n-1) + j
	if j > i {
		k--
	}
	return l.ringsStart() + k*l.ringBytes
}

// board returns the offset of the collectives' board area (see
// SegmentAreas), after the rings; segments of more than areas.MaxRanks
// ranks have none.
func (l shmLayout) board() int { return l.ringsStart() + l.n*(l.n-1)*l.ringBytes }

// stage returns the offset of the collectives' stage area, page-aligned
// after the board's.
func (l shmLayout) stage() int { return roundUp(l.board()+l.n*l.areas.Board, shmPage) }

// hasAreas reports whether the segment sets aside collective areas.
func (l shmLayout) hasAreas() bool { return l.n <= l.areas.MaxRanks }

func (l shmLayout) size() int {
	if !l.hasAreas() {
		return l.board()
	}
	return l.stage() + l.n*l.areas.Stage
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// word32 and word64 point at an aligned word of a mapping, for sync/atomic.
func word32(mem []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
func word64(mem []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }

// writeSegmentHeader initialises a new segment (the creator does it before
// publishing the file's name).
func writeSegmentHeader(mem []byte, l shmLayout, ranks []int) {
	le := binary.LittleEndian
	le.PutUint32(mem[8:], shmVersion)
	le.PutUint32(mem[12:], uint32(l.n))
	le.PutUint64(mem[16:], uint64(l.ringBytes))
	le.PutUint64(mem[24:], uint64(l.size()))
	for i, r := range ranks {
		le.PutUint32(mem[64+4*i:], uint32(r))
	}
	atomic.StoreUint64(word64(mem, 0), shmMagic)
}

// checkSegmentHeader verifies that a mapped segment is the one described.
func checkSegmentHeader(mem []byte, l shmLayout, ranks []int) error {
	le := binary.LittleEndian
	if m := atomic.LoadUint64(word64(mem, 0)); m != shmMagic {
		return fmt.Errorf("bad segment magic %#x", m)
	}
	if v, n, rb, sz := le.Uint32(mem[8:]), le.Uint32(mem[12:]), le.Uint64(mem[16:]), le.Uint64(mem[24:]); v != shmVersion ||
		int(n) != l.n || int(rb) != l.ringBytes || int(sz) != l.size() {
		return fmt.Errorf("segment is version %d, %d ranks, %d-byte rings, %d bytes; want version %d, %d ranks, %d-byte rings, %d bytes",
			v, n, rb, sz, shmVersion, l.n, l.ringBytes, l.size())
	}
	for i, r := range ranks {
		if got := le.Uint32(mem[64+4*i:]); int(got) != r {
			return fmt.Errorf("segment lists rank %d at local index %d, want %d", got, i, r)
		}
	}
	return nil
}

// consumerWords are the words of one rank's consumer block.
type consumerWords struct {
	sleepers, wake *uint32
	drain          *uint32
	closed         *uint32
	pid, probe     *uint64
}

func consumerAt(mem []byte, off int) consumerWords {
	return consumerWords{
		sleepers: word32(mem, off),
		wake:     word32(mem, off+4),
		drain:    word32(mem, off+cacheLine+4),
		closed:   word32(mem, off+2*cacheLine),
		pid:      word64(mem, off+3*cacheLine),
		probe:    word64(mem, off+3*cacheLine+8),
	}
}

// wakePoller wakes the rank's poller if it sleeps or is about to.
func (c consumerWords) wakePoller() {
	if atomic.LoadUint32(c.sleepers) != 0 {
		atomic.AddUint32(c.wake, 1)
		futexWake(c.wake)
	}
}

// wakeDrainer asks the rank's drainer to empty its rings; it sees the
// request at its next look (drainLoop).
func (c consumerWords) wakeDrainer() {
	atomic.AddUint32(c.drain, 1)
}

// ringWords are the control words of one ring.
type ringWords struct {
	head    *uint64
	space   *uint32
	single  *uint32
	waiting *uint32
}

func ringAt(mem []byte, off int) ringWords {
	return ringWords{head: word64(mem, off), space: word32(mem, off+8), single: word32(mem, off+16), waiting: word32(mem, off+cacheLine)}
}

// Record header access. d is a ring; off a record's offset in it.
func recSeq(d []byte, off int) *uint64 { return word64(d, off) }

func recordSpan(n int) int { return recHeader + roundUp(n, cacheLine) }

func putFirstHeader(d []byte, off int, h *Header, total, n int) {
	le := binary.LittleEndian
	b := d[off : off+recHeader]
	b[8] = recFirst
	le.PutUint32(b[12:], uint32(n))
	le.PutUint64(b[16:], h.Comm)
	le.PutUint64(b[24:], h.Seq)
	le.PutUint64(b[32:], h.Tag)
	b[40] = byte(h.Sig.Kind)
	b[41] = byte(h.Sig.DType)
	b[42] = byte(h.Sig.Op)
	b[43] = h.Sig.Algo
	le.PutUint32(b[44:], uint32(h.Sig.Root))
	le.PutUint64(b[48:], h.Sig.Count)
	le.PutUint64(b[56:], uint64(total))
}

func putShortHeader(d []byte, off int, kind byte, n int) {
	d[off+8] = kind
	binary.LittleEndian.PutUint32(d[off+12:], uint32(n))
}

func recKind(d []byte, off int) (kind byte, n int) {
	return d[off+8], int(binary.LittleEndian.Uint32(d[off+12:]))
}

func getFirstHeader(d []byte, off int) (h Header, total uint64) {
	le := binary.LittleEndian
	b := d[off : off+recHeader]
	h.Comm = le.Uint64(b[16:])
	h.Seq = le.Uint64(b[24:])
	h.Tag = le.Uint64(b[32:])
	h.Sig.Kind = core.Kind(b[40])
	h.Sig.DType = core.DType(b[41])
	h.Sig.Op = core.Op(b[42])
	h.Sig.Algo = b[43]
	h.Sig.Root = int32(le.Uint32(b[44:]))
	h.Sig.Count = le.Uint64(b[48:])
	return h, le.Uint64(b[56:])
}

// WaitPhase is what a waiting rank does next.
type WaitPhase uint8

const (
	PhaseSpin  WaitPhase = iota // poll again at once
	PhaseYield                  // poll after yielding the CPU
	PhaseSleep                  // sleep on a futex until woken
)

// Backoff paces one wait: spin for spinWait, then yield between polls for
// yieldWait, then sleep. Reset it after progress. It reads internal/clock,
// which costs a fraction of time.Now on virtual machines: the yield phase
// reads it on every poll.
type Backoff struct {
	spin, yield time.Duration
	n           int
	start       int64 // clock.Nanos at the wait's 64th poll (or first, without spin)
	started     bool
	phase       WaitPhase
}

func (b *Backoff) reset() { b.n, b.phase = 0, PhaseSpin }

// Polls is the number of polls so far (calls of Next).
func (b *Backoff) Polls() int { return b.n }

// Next returns the phase of the next poll.
func (b *Backoff) Next() WaitPhase {
	b.n++
	if b.phase == PhaseSleep {
		return PhaseSleep
	}
	if b.n == 1 {
		// The clock is read from the 64th poll on: most waits for a
		// small message end before it.
		b.started = false
		if b.spin == 0 {
			b.phase = PhaseYield
			b.start, b.started = clock.Nanos(), true
		}
	}
	if b.n&63 == 0 && !b.started {
		b.start, b.started = clock.Nanos(), true
	}
	if b.n&63 == 0 || b.phase != PhaseSpin {
		switch el := time.Duration(clock.Nanos() - b.start); {
		case el >= b.spin+b.yield:
			b.phase = PhaseSleep
		case el >= b.spin:
			b.phase = PhaseYield
		}
	}
	return b.phase
}

// crowdedSpinWait is how long a rank on a crowded host (more ranks than
// CPUs) polls before it yields: as long as a system call takes here,
// measured once, and at least the backoff's first 64 polls. A yield
// hands the CPU to the co-located rank, and what that costs depends on
// the machine far more than the chance that the awaited peer, running on
// another CPU, answers within a few polls: where system calls and CPU
// switches are cheap, yielding at once is fastest; where they are dear,
// yielding at once was several times slower than polling a while first.
// A switch costs a multiple of a system call, so a host whose calls are
// dear gets a spin of that order; one whose calls are cheap polls only
// the first 64 times (see docs/tuning.md).
var crowdedSpinWait = sync.OnceValue(systemCallCost)

// YieldCPU gives up the CPU to other threads of any process (ranks may
// outnumber cores). With a single P it also lets this process's other
// goroutines run, on every 64th call. With more Ps they have others to
// run on, and runtime.Gosched would do harm: it puts the caller on the
// global run queue and wakes an idle thread to look for work, which takes
// the caller over on another thread (the first one parks) and competes
// with the peer being waited for. With as many ranks as cores, those
// wakes turned a few microseconds' delay into stalls a hundred times
// longer.
func (b *Backoff) YieldCPU() {
	if b.n&63 == 0 && runtime.GOMAXPROCS(0) == 1 {
		runtime.Gosched()
		return
	}
	osYield()
}

// sleepOn sleeps on the futex word while it holds val, until a wake (every
// waker changes the word first), one of the channels is closed, or d has
// passed. Nil channels are ignored. It allocates nothing (a loop of small
// collectives must not, and under load its waits do reach here): the
// channels are checked between futex waits of growing slices, from
// firstSleepSlice to maxSleepSlice, which bounds how late a closed channel
// is noticed.
//
// held sleeps keep the thread's P (see shmEndpoint.sleep): slices of at
// most heldSleepSlice, with a turn of the scheduler between them for the
// process's other goroutines.
func sleepOn(word *uint32, val uint32, d time.Duration, held bool, a, b, c <-chan struct{}) {
	deadline := time.Now().Add(d)
	for slice := firstSleepSlice; ; slice = min(2*slice, maxSleepSlice) {
		if atomic.LoadUint32(word) != val || closedAny(a, b, c) {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		if held {
			futexWaitHeld(word, val, min(slice, heldSleepSlice, left))
			runtime.Gosched()
			continue
		}
		futexWait(word, val, min(slice, left))
	}
}

// SleepsHoldingP reports whether this rank's shared-memory waits sleep
// holding their P (see shmEndpoint.sleep): it reaches peers through
// shared memory, is alone in its process among them, and runs with one
// P. Such a rank's Go runtime monitor, once slowed down, stays slow while
// it waits.
func (e *Hybrid) SleepsHoldingP() bool { return e.shm != nil && e.shm.holdsP() }

// holdsP reports whether this endpoint's sleeps keep their P (see sleep).
func (e *shmEndpoint) holdsP() bool { return e.alone && runtime.GOMAXPROCS(0) == 1 }

// sleep is sleepOn for this endpoint's waits. A rank alone in its process
// with one P (GOCOMM_BIND's default for a rank with a core of its own)
// sleeps holding the P. A sleep that lets the runtime take the P back
// from the thread (a system call longer than sysmon's shortest tick, with
// no P idle) leaves every P idle, and the thread's return wakes the
// runtime's monitor, which then ticks at its fastest for a while, taking
// a share of the rank's core each time: the first operations after any
// wait that reached the sleep stalled at the 99th percentile. Holding
// the P, the monitor sees a running goroutine and stays at its slow
// tick.
func (e *shmEndpoint) sleep(word *uint32, val uint32, d time.Duration, a, b, c <-chan struct{}) {
	sleepOn(word, val, d, e.holdsP(), a, b, c)
}

// Slices of a sleepOn wait.
const (
	firstSleepSlice = 100 * time.Microsecond
	maxSleepSlice   = 10 * time.Millisecond
	// heldSleepSlice bounds a sleep that keeps its P: how long the
	// process's other goroutines (and a stop of the world for a garbage
	// collection) may wait for it.
	heldSleepSlice = time.Millisecond
)

// closedAny reports whether one of the channels is closed (or ready).
func closedAny(a, b, c <-chan struct{}) bool {
	select {
	case <-a:
		return true
	case <-b:
		return true
	case <-c:
		return true
	default:
		return false
	}
}
