package bench

import (
	"fmt"
	"strings"
)

// Op is an operation commbench measures.
type Op uint8

// Operations, in the order commbench runs them for --op all.
const (
	AllReduce Op = iota + 1
	Reduce
	Broadcast
	AllGather
	ReduceScatter
	AllToAll
	SendRecv
	PingPong
	Barrier
	// OneBit is onebit.AllReduce, DeepSpeed's 1-bit compressed all-reduce,
	// on float32 (not part of --op all).
	OneBit
)

// AllOps is what --op all selects.
var AllOps = []Op{AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AllToAll, SendRecv, PingPong, Barrier}

var opNames = [...]string{
	AllReduce: "allreduce", Reduce: "reduce", Broadcast: "broadcast", AllGather: "allgather",
	ReduceScatter: "reducescatter", AllToAll: "alltoall", SendRecv: "sendrecv", PingPong: "pingpong",
	Barrier: "barrier", OneBit: "onebit",
}

// opAliases are the other spellings ParseOp accepts (nccl-tests' binary
// names, torch.distributed's and DeepSpeed's function names).
var opAliases = map[string]Op{
	"all_reduce": AllReduce, "all-reduce": AllReduce,
	"bcast": Broadcast, "all_gather": AllGather, "all-gather": AllGather,
	"reduce_scatter": ReduceScatter, "reduce-scatter": ReduceScatter,
	"all_to_all": AllToAll, "all-to-all": AllToAll, "alltoallv": AllToAll,
	"send_recv": SendRecv, "send-recv": SendRecv, "pt2pt": PingPong, "ping-pong": PingPong,
	"compressed_allreduce": OneBit, "onebit_allreduce": OneBit, "1bit": OneBit,
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// MarshalText implements encoding.TextMarshaler (JSON output).
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (o *Op) UnmarshalText(b []byte) error {
	v, err := ParseOp(string(b))
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// ParseOp parses one operation name, case-insensitively.
func ParseOp(s string) (Op, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range opNames {
		if n != "" && n == s {
			return Op(i), nil
		}
	}
	if o, ok := opAliases[s]; ok {
		return o, nil
	}
	return 0, fmt.Errorf("unknown op %q (want one of %s, or all)", s, strings.Join(opNames[1:], ", "))
}

// Rooted reports whether the op has a root rank.
func (o Op) Rooted() bool { return o == Reduce || o == Broadcast }

// Reduces reports whether the op applies a reduction operator.
func (o Op) Reduces() bool { return o == AllReduce || o == Reduce || o == ReduceScatter }

// Blocked reports whether the op splits its full buffer into one block per
// rank, so that the size must be a multiple of ranks*element size.
func (o Op) Blocked() bool { return o == AllGather || o == ReduceScatter || o == AllToAll }

// BusFactor is nccl-tests' ratio busbw/algbw for n ranks: the fraction of
// the full buffer S each rank must send (or receive) over its busiest link
// with an optimal algorithm, so that busbw is comparable with the link
// speed whatever the op and world size.
//
//	allreduce                      2(n-1)/n
//	reducescatter, allgather       (n-1)/n   (S = the full, n-block buffer)
//	alltoall                       (n-1)/n   (S = the full send buffer)
//	broadcast, reduce              1
//	sendrecv, pingpong             1
//	barrier                        0 (no data)
//	onebit                         2(n-1)/n
//
// onebit's S is the float32 input, not the bytes it sends (about S/32 plus
// a few scales per rank): its algbw is the rate at which it averages
// full-precision data, and its busbw the bus bandwidth a plain all-reduce
// would need to keep up, so the two columns compare with allreduce's at
// the same size (and can exceed the link's speed; that is the point).
func (o Op) BusFactor(n int) float64 {
	if n < 1 {
		return 0
	}
	nf := float64(n)
	switch o {
	case AllReduce, OneBit:
		return 2 * (nf - 1) / nf
	case ReduceScatter, AllGather, AllToAll:
		return (nf - 1) / nf
	case Broadcast, Reduce, SendRecv, PingPong:
		return 1
	}
	return 0
}

// Bandwidths returns algbw = S/t and busbw = algbw*BusFactor(n) in GB/s
// (1e9 bytes per second) for size bytes moved in seconds.
func (o Op) Bandwidths(size int64, seconds float64, n int) (algbw, busbw float64) {
	if seconds <= 0 || size <= 0 {
		return 0, 0
	}
	algbw = float64(size) / seconds / 1e9
	return algbw, algbw * o.BusFactor(n)
}

// Layout is the shape of one case for one rank: element counts of the
// send and receive buffers.
type Layout struct {
	Count int // elements of the full buffer (the count column)
	Block int // elements per rank block (Blocked ops), else Count
	Send  int // elements this rank sends from
	Recv  int // elements this rank receives into
}

// LayoutOf gives the buffers of op for a full buffer of size bytes,
// elements of esize bytes and n ranks, as nccl-tests defines them: S is
// the all-reduce buffer, the all-gather output, the reduce-scatter input
// and the all-to-all send buffer. Size is first rounded down to a whole
// number of elements (and of blocks); ok is false when nothing is left.
func LayoutOf(op Op, size int64, esize, n int) (l Layout, ok bool) {
	if esize <= 0 || n <= 0 {
		return Layout{}, false
	}
	if op == Barrier {
		return Layout{}, true
	}
	count := int(size / int64(esize))
	if op.Blocked() {
		blk := count / n
		if blk == 0 {
			return Layout{}, false
		}
		l = Layout{Count: blk * n, Block: blk}
		switch op {
		case AllGather:
			l.Send, l.Recv = blk, blk*n
		case ReduceScatter:
			l.Send, l.Recv = blk*n, blk
		default:
			l.Send, l.Recv = blk*n, blk*n
		}
		return l, true
	}
	if count == 0 {
		return Layout{}, false
	}
	return Layout{Count: count, Block: count, Send: count, Recv: count}, true
}

// OpSpec selects an op and, optionally, its own size range (--op
// allreduce,broadcast@64M,alltoall@1K:1M); zero Min/Max mean the sweep's.
type OpSpec struct {
	Op       Op
	Min, Max int64
}

func (s OpSpec) String() string {
	switch {
	case s.Min == 0 && s.Max == 0:
		return s.Op.String()
	case s.Min == s.Max:
		return s.Op.String() + "@" + FormatSize(s.Min)
	}
	return s.Op.String() + "@" + FormatSize(s.Min) + ":" + FormatSize(s.Max)
}

// ParseOpSpecs parses a comma-separated --op value: op names, "all", and
// op@size or op@min:max to give one op its own sizes.
func ParseOpSpecs(s string) ([]OpSpec, error) {
	var specs []OpSpec
	seen := map[Op]bool{}
	add := func(sp OpSpec) error {
		if seen[sp.Op] {
			return fmt.Errorf("op %v given twice", sp.Op)
		}
		seen[sp.Op] = true
		specs = append(specs, sp)
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, sizes, hasSizes := strings.Cut(f, "@")
		var sp OpSpec
		if hasSizes {
			lo, hi, isRange := strings.Cut(sizes, ":")
			var err error
			if sp.Min, err = ParseSize(lo); err != nil {
				return nil, fmt.Errorf("op %q: %w", f, err)
			}
			sp.Max = sp.Min
			if isRange {
				if sp.Max, err = ParseSize(hi); err != nil {
					return nil, fmt.Errorf("op %q: %w", f, err)
				}
			}
			if sp.Max < sp.Min {
				return nil, fmt.Errorf("op %q: max size below min size", f)
			}
		}
		if strings.EqualFold(strings.TrimSpace(name), "all") {
			for _, o := range AllOps {
				if seen[o] {
					continue
				}
				sp.Op = o
				if err := add(sp); err != nil {
					return nil, err
				}
			}
			continue
		}
		op, err := ParseOp(name)
		if err != nil {
			return nil, err
		}
		sp.Op = op
		if err := add(sp); err != nil {
			return nil, err
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("no op given")
	}
	return specs, nil
}
