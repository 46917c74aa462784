package core

import "fmt"

// DType names an element type on the wire and in kernels. The numbering is
// part of the wire format; append only.
type DType uint8

// Element types.
const (
	Int8 DType = iota + 1
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float16
	BFloat16
	Float32
	Float64
	Byte // opaque bytes (object collectives, barriers); no reductions
)

var dtypeNames = [...]string{
	Int8: "int8", Int16: "int16", Int32: "int32", Int64: "int64",
	Uint8: "uint8", Uint16: "uint16", Uint32: "uint32", Uint64: "uint64",
	Float16: "float16", BFloat16: "bfloat16", Float32: "float32", Float64: "float64",
	Byte: "byte",
}

func (d DType) String() string {
	if int(d) < len(dtypeNames) && dtypeNames[d] != "" {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the element size in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Int8, Uint8, Byte:
		return 1
	case Int16, Uint16, Float16, BFloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// Valid reports whether d is a known element type.
func (d DType) Valid() bool { return d.Size() != 0 }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float16 || d == BFloat16 || d == Float32 || d == Float64
}

// IsInteger reports whether d is a signed or unsigned integer type.
func (d DType) IsInteger() bool { return d.Valid() && !d.IsFloat() && d != Byte }

// Op is a reduction operator. The numbering follows deepspeed.comm.ReduceOp
// (SUM=0 ... AVG=7) and is part of the wire format.
type Op uint8

// Reduction operators.
const (
	Sum Op = iota
	Prod
	Min
	Max
	BAnd
	BOr
	BXor
	Avg
)

// FirstUserOp is the number of the first user-defined reduction op
// (comm.NewOp): ops from FirstUserOp up are handles the comm package hands
// out, each standing for a function it passes to the backend beside the
// op (backend.Request.User).
const FirstUserOp Op = 64

var opNames = [...]string{Sum: "Sum", Prod: "Prod", Min: "Min", Max: "Max", BAnd: "BAnd", BOr: "BOr", BXor: "BXor", Avg: "Avg"}

func (o Op) String() string {
	switch {
	case int(o) < len(opNames):
		return opNames[o]
	case o.IsUser():
		return fmt.Sprintf("UserOp(%d)", uint8(o))
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// IsUser reports whether o is a user-defined op's handle.
func (o Op) IsUser() bool { return o >= FirstUserOp }

// ValidFor reports whether op can reduce elements of type d: the bitwise
// operators need integers, and nothing reduces Byte.
func (o Op) ValidFor(d DType) bool {
	switch o {
	case Sum, Prod, Min, Max, Avg:
		return d.Valid() && d != Byte
	case BAnd, BOr, BXor:
		return d.IsInteger()
	}
	return false
}

// Kind names a collective or point-to-point operation. The numbering is part
// of the wire format (frame headers carry it for mismatch detection).
type Kind uint8

// Operation kinds.
const (
	KindNone Kind = iota
	KindAllReduce
	KindReduce
	KindBroadcast
	KindAllGather
	KindAllGatherV
	KindGather
	KindGatherV
	KindScatter
	KindScatterV
	KindReduceScatter
	KindReduceScatterV
	KindAllToAll
	KindAllToAllV
	KindBarrier
	KindMonitoredBarrier
	KindSend
	KindRecv
	KindSplit
	KindNewGroup
	KindObject
)

var kindNames = [...]string{
	KindNone: "none", KindAllReduce: "AllReduce", KindReduce: "Reduce", KindBroadcast: "Broadcast",
	KindAllGather: "AllGather", KindAllGatherV: "AllGatherV", KindGather: "Gather", KindGatherV: "GatherV",
	KindScatter: "Scatter", KindScatterV: "ScatterV", KindReduceScatter: "ReduceScatter",
	KindReduceScatterV: "ReduceScatterV", KindAllToAll: "AllToAll", KindAllToAllV: "AllToAllV",
	KindBarrier: "Barrier", KindMonitoredBarrier: "MonitoredBarrier", KindSend: "Send", KindRecv: "Recv",
	KindSplit: "Split", KindNewGroup: "NewGroup", KindObject: "Object",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}
