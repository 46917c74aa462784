package backend

import "github.com/gocomm/comm/core"

// The element types, reduction operators and operation kinds are core's
// (the vocabulary every layer shares). Request and the extension
// interfaces are written in them, so these aliases are the driver API's
// names: a driver needs this package alone to read a Request. The root
// package aliases core's directly.
type (
	DType = core.DType
	Op    = core.Op
	Kind  = core.Kind
)

const (
	Int8                 = core.Int8
	Int16                = core.Int16
	Int32                = core.Int32
	Int64                = core.Int64
	Uint8                = core.Uint8
	Uint16               = core.Uint16
	Uint32               = core.Uint32
	Uint64               = core.Uint64
	Float16              = core.Float16
	BFloat16             = core.BFloat16
	Float32              = core.Float32
	Float64              = core.Float64
	Byte                 = core.Byte
	Sum                  = core.Sum
	Prod                 = core.Prod
	Min                  = core.Min
	Max                  = core.Max
	BAnd                 = core.BAnd
	BOr                  = core.BOr
	BXor                 = core.BXor
	Avg                  = core.Avg
	KindNone             = core.KindNone
	KindAllReduce        = core.KindAllReduce
	KindReduce           = core.KindReduce
	KindBroadcast        = core.KindBroadcast
	KindAllGather        = core.KindAllGather
	KindAllGatherV       = core.KindAllGatherV
	KindGather           = core.KindGather
	KindGatherV          = core.KindGatherV
	KindScatter          = core.KindScatter
	KindScatterV         = core.KindScatterV
	KindReduceScatter    = core.KindReduceScatter
	KindReduceScatterV   = core.KindReduceScatterV
	KindAllToAll         = core.KindAllToAll
	KindAllToAllV        = core.KindAllToAllV
	KindBarrier          = core.KindBarrier
	KindMonitoredBarrier = core.KindMonitoredBarrier
	KindSend             = core.KindSend
	KindRecv             = core.KindRecv
	KindSplit            = core.KindSplit
	KindNewGroup         = core.KindNewGroup
	KindObject           = core.KindObject
)
