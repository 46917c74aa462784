package profile

import (
	"strings"
	"sync"
	"time"
)

// Operation names, as records carry them. They follow deepspeed.comm's
// spellings where it has the operation.
const (
	OpAllReduce        = "all_reduce"
	OpReduce           = "reduce"
	OpBroadcast        = "broadcast"
	OpAllGather        = "all_gather"
	OpAllGatherV       = "all_gather_v"
	OpGather           = "gather"
	OpGatherV          = "gather_v"
	OpScatter          = "scatter"
	OpScatterV         = "scatter_v"
	OpReduceScatter    = "reduce_scatter"
	OpReduceScatterV   = "reduce_scatter_v"
	OpAllToAll         = "all_to_all"
	OpAllToAllV        = "all_to_all_v"
	OpBarrier          = "barrier"
	OpMonitoredBarrier = "monitored_barrier"
	OpSend             = "send"
	OpRecv             = "recv"
)

// aliases maps DeepSpeed's op names to the records' names, so that a
// DeepSpeed prof_ops list selects the same operations here.
var aliases = map[string][]string{
	"all_gather_into_tensor": {OpAllGather},
	"all_gather_base":        {OpAllGather},
	"reduce_scatter_tensor":  {OpReduceScatter},
	"reduce_scatter_base":    {OpReduceScatter},
	"all_to_all_single":      {OpAllToAll, OpAllToAllV},
	"inference_all_reduce":   {OpAllReduce},
	"all_reduce_coalesced":   {OpAllReduce},
	"isend":                  {OpSend},
	"irecv":                  {OpRecv},
}

// Record is one profiled operation on one rank.
type Record struct {
	// Op is the operation (OpAllReduce, ...); Name is the record name: the
	// log name given with comm.WithLogName, else Op, with the caller
	// appended in debug mode. The summary groups records by Name.
	Op   string `json:"op"`
	Name string `json:"name"`
	// Parent is, for an operation run as a piece of an object collective
	// (package object: the broadcast of sizes, the all_gather_v of
	// payloads...), that collective's name (object.Broadcast, ...); "" for
	// an operation the program called itself. The object collective has a
	// record of its own, under its name, with no sequence number.
	Parent string `json:"parent,omitempty"`
	// Comm identifies the communicator (equal on every member rank);
	// CommSize is its size, the n of the bandwidth formulas.
	Comm     uint64 `json:"comm"`
	CommSize int    `json:"comm_size"`
	// Rank is this rank in the communicator, WorldRank in the world.
	Rank      int `json:"rank"`
	WorldRank int `json:"world_rank"`
	// Seq is the collective's sequence number in its communicator (equal on
	// every member rank); 0 for Send and Recv.
	Seq uint64 `json:"seq"`
	// Bytes is the message size as DeepSpeed records it (see MessageSizes);
	// TotalBytes is what nccl-tests' formulas divide by the latency.
	Bytes      int64  `json:"bytes"`
	TotalBytes int64  `json:"total_bytes"`
	DType      string `json:"dtype,omitempty"`
	// Algorithm is the algorithm that ran ("" for Send and Recv).
	Algorithm string `json:"algorithm,omitempty"`
	// Root is the root of a rooted collective and Peer the other rank of a
	// Send or Recv (communicator ranks), -1 otherwise.
	Root int `json:"root"`
	Peer int `json:"peer"`
	// Start is when this rank entered the operation (its Start call);
	// Latency runs from Start to completion, whether or when anyone waited.
	Start   time.Time     `json:"start"`
	Latency time.Duration `json:"latency_ns"`
	// AlgBW and BusBW are nccl-tests' bandwidths in GB/s (see Bandwidth).
	AlgBW float64 `json:"algbw_gbs"`
	BusBW float64 `json:"busbw_gbs"`
	// Err is the operation's error, "" on success. Failed operations are
	// kept for the trace but left out of the summary.
	Err string `json:"error,omitempty"`
}

// MessageSizes returns, for op, the message size S that DeepSpeed records
// (the bytes of the op's data argument on this rank) and the bytes T that
// nccl-tests' formulas divide by time. send and recv are this rank's buffer
// lengths in bytes, all the bytes of the whole collective's concatenated
// buffer (the sum of the per-rank counts) for the gathering and scattering
// kinds.
//
//	op                                S        T
//	all_reduce, reduce, broadcast     send     S
//	all_gather(_v), gather(_v)        send     all (every rank's block)
//	scatter(_v)                       recv     all
//	reduce_scatter(_v)                send     S (the full input)
//	all_to_all(_v)                    send     S
//	send / recv                       send / recv
//	barrier, monitored_barrier        0        0
func MessageSizes(op string, send, recv, all int64) (s, t int64) {
	switch op {
	case OpAllGather, OpAllGatherV, OpGather, OpGatherV:
		return send, all
	case OpScatter, OpScatterV:
		return recv, all
	case OpRecv:
		return recv, recv
	case OpBarrier, OpMonitoredBarrier:
		return 0, 0
	}
	return send, send
}

// BusFactor is nccl-tests' ratio of bus bandwidth to algorithm bandwidth
// for op over n ranks: 2(n-1)/n for all-reduce, (n-1)/n for the gathering,
// scattering and all-to-all kinds, 1 for the rest (broadcast, reduce,
// send, recv, barrier, and any name it does not know).
func BusFactor(op string, n int) float64 {
	if n < 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch op {
	case OpAllReduce:
		return 2 * f
	case OpAllGather, OpAllGatherV, OpGather, OpGatherV, OpScatter, OpScatterV,
		OpReduceScatter, OpReduceScatterV, OpAllToAll, OpAllToAllV:
		return f
	}
	return 1
}

// Bandwidth returns nccl-tests' figures for op moving totalBytes (T of
// MessageSizes) among n ranks in t: algbw = T/t and busbw = algbw ·
// BusFactor(op, n), in GB/s (1e9 bytes per second). n is the size of the
// communicator the op ran on; t = 0 gives zeros.
//
// DeepSpeed's comms logger differs: its all-reduce "tput" is 2S/t (twice
// nccl-tests' algbw), its units are Gbps (bits), n is the global world size
// even for an op on a sub-group, and for reduce-scatter it multiplies the
// full input by n (over-counting by n). DeepSpeedBandwidth gives its tput
// with the last two faults fixed.
func Bandwidth(op string, totalBytes int64, n int, t time.Duration) (algbw, busbw float64) {
	if t <= 0 {
		return 0, 0
	}
	algbw = float64(totalBytes) / t.Seconds() / 1e9
	return algbw, algbw * BusFactor(op, n)
}

// DeepSpeedBandwidth returns DeepSpeed's calc_bw_log figures in Gbps (1e9
// bits per second) for a record: tput is 2S/t for all-reduce, T/t (= n·S/t)
// for all-gather, S/t otherwise; busbw is nccl-tests' for all-reduce,
// all-gather, reduce-scatter and all-to-all and S/t for the rest (gather
// and scatter included). Two of DeepSpeed's faults are not reproduced: n is
// the op's own communicator size, and reduce-scatter's tput is S/t (S being
// the full input) rather than n·S/t.
func DeepSpeedBandwidth(r Record) (tput, busbw float64) {
	if r.Latency <= 0 {
		return 0, 0
	}
	perSec := func(b int64) float64 { return float64(b) * 8 / r.Latency.Seconds() / 1e9 }
	s := perSec(r.Bytes)
	switch r.Op {
	case OpAllReduce:
		return 2 * s, s * BusFactor(r.Op, r.CommSize)
	case OpAllGather, OpAllGatherV:
		t := perSec(r.TotalBytes)
		return t, t * BusFactor(r.Op, r.CommSize)
	case OpReduceScatter, OpReduceScatterV, OpAllToAll, OpAllToAllV:
		return s, s * BusFactor(r.Op, r.CommSize)
	}
	return s, s
}

// Logger holds one rank's records. It is safe for concurrent use.
type Logger struct {
	cfg    Config
	chosen map[string]bool // Config.Ops with aliases expanded

	mu sync.Mutex // protects chunks, n, strs and strIndex
	// chunks hold the records in fixed-size arrays of pointer-free entries,
	// so that adding one never copies the others and the garbage collector
	// does not scan them (a growing slice of Records did both, and cost
	// more than the rest of the profiler).
	chunks   [][]entry
	n        int
	strs     []string          // interned strings; strs[0] is ""
	strIndex map[string]uint32 // index in strs
}

// chunkLen is the number of records per chunk (about 13 KiB).
const chunkLen = 128

// entry is a Record without pointers: strings are indices into
// Logger.strs, the start is Unix nanoseconds.
type entry struct {
	start, latency            int64
	comm, seq                 uint64
	bytes, total              int64
	op, name, dtype, alg, err uint32
	parent                    uint32
	commSize, rank, world     int32
	root, peer                int32
}

// NewLogger returns an empty logger for cfg.
func NewLogger(cfg Config) *Logger {
	l := &Logger{cfg: cfg, chosen: make(map[string]bool), strs: []string{""}, strIndex: map[string]uint32{"": 0}}
	for _, op := range cfg.Ops {
		op = strings.TrimSpace(op)
		l.chosen[op] = true
		for _, a := range aliases[op] {
			l.chosen[a] = true
		}
	}
	return l
}

// Config returns the logger's configuration.
func (l *Logger) Config() Config { return l.cfg }

// Selected reports whether an operation op called with log name logName
// ("" for none) is to be profiled: always unless Config.OpsOnly, else when
// Config.Ops names op (or a DeepSpeed alias of it) or logName. DeepSpeed
// matches only an explicit log name, so that "prof_ops": ["all_reduce"]
// never selects a plain all_reduce there; here it does.
func (l *Logger) Selected(op, logName string) bool {
	if !l.cfg.OpsOnly {
		return true
	}
	return l.chosen[op] || (logName != "" && l.chosen[logName])
}

// Add appends a record. Its Start keeps only the wall clock reading, and
// its AlgBW and BusBW are not kept: Records computes them with Bandwidth.
func (l *Logger) Add(r Record) {
	l.mu.Lock()
	e := entry{
		start: r.Start.UnixNano(), latency: int64(r.Latency), comm: r.Comm, seq: r.Seq,
		bytes: r.Bytes, total: r.TotalBytes,
		op: l.intern(r.Op), name: l.intern(r.Name), dtype: l.intern(r.DType), alg: l.intern(r.Algorithm), err: l.intern(r.Err),
		parent:   l.intern(r.Parent),
		commSize: int32(r.CommSize), rank: int32(r.Rank), world: int32(r.WorldRank), root: int32(r.Root), peer: int32(r.Peer),
	}
	last := len(l.chunks) - 1
	if last < 0 || len(l.chunks[last]) == chunkLen {
		l.chunks = append(l.chunks, make([]entry, 0, chunkLen))
		last++
	}
	l.chunks[last] = append(l.chunks[last], e)
	l.n++
	l.mu.Unlock()
}

// intern returns the index of s in l.strs, adding it if needed; l.mu is
// held.
func (l *Logger) intern(s string) uint32 {
	i, ok := l.strIndex[s]
	if !ok {
		i = uint32(len(l.strs))
		l.strs = append(l.strs, s)
		l.strIndex[s] = i
	}
	return i
}

// Records returns the records, in the order the operations completed.
func (l *Logger) Records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	out := make([]Record, 0, l.n)
	for _, c := range l.chunks {
		for _, e := range c {
			op, lat := l.strs[e.op], time.Duration(e.latency)
			alg, bus := Bandwidth(op, e.total, int(e.commSize), lat)
			out = append(out, Record{
				Op: op, Name: l.strs[e.name], Parent: l.strs[e.parent], Comm: e.comm, CommSize: int(e.commSize),
				Rank: int(e.rank), WorldRank: int(e.world), Seq: e.seq, Bytes: e.bytes, TotalBytes: e.total,
				DType: l.strs[e.dtype], Algorithm: l.strs[e.alg], Root: int(e.root), Peer: int(e.peer),
				Start: time.Unix(0, e.start), Latency: lat, AlgBW: alg, BusBW: bus,
				Err: l.strs[e.err],
			})
		}
	}
	return out
}

// Len is the number of records.
func (l *Logger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Reset drops every record.
func (l *Logger) Reset() {
	l.mu.Lock()
	l.chunks, l.n = nil, 0
	// Interned strings stay: they are few (names, types, algorithms) unless
	// many operations failed.
	l.mu.Unlock()
}

// Label is the record's name as reports print it: Name, after its Parent
// when it has one ("object.Broadcast > broadcast").
func (r Record) Label() string {
	if r.Parent == "" {
		return r.Name
	}
	return r.Parent + " > " + r.Name
}
