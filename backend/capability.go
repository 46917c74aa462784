package backend

import "fmt"

// Capability names an optional feature a communicator may offer; comm's
// (*Comm).Supports reports whether it does, so that code written for
// several backends (DeepSpeed's has_* queries) can choose a path up
// front instead of failing mid-job.
type Capability uint8

// The capabilities. A backend whose Comm does not implement Capabilities
// offers BaseCapabilities.
const (
	// AllReduceCoalesced: comm.AllReduceCoalesced runs as one collective
	// over the packed buffers (DeepSpeed's has_all_reduce_coalesced).
	AllReduceCoalesced Capability = iota + 1
	// AllGatherCoalesced: comm.AllGatherCoalesced runs as one collective.
	AllGatherCoalesced
	// AllGatherIntoTensor: comm.AllGather gathers into one flat buffer,
	// block r at recv[r*len(send):] (has_all_gather_into_tensor).
	AllGatherIntoTensor
	// ReduceScatterTensor: comm.ReduceScatter scatters from one flat
	// buffer of Size() blocks (has_reduce_scatter_tensor).
	ReduceScatterTensor
	// InferenceAllReduce: comm.InferenceAllReduce runs its latency-first
	// schedule (else it would be a plain all-reduce).
	InferenceAllReduce
	// MonitoredBarrier: comm.MonitoredBarrier names the late ranks.
	MonitoredBarrier
	// AnySourceRecv: comm.Recv accepts AnySource.
	AnySourceRecv
	// RecvUpTo: a receive may take a message shorter than its buffer and
	// learn its length (comm.RecvUpTo; Request.UpTo).
	RecvUpTo
	// UserOps: collectives run reduce ops made by comm.NewOp. comm's
	// Supports answers it from UserOpRunner, not from Capabilities.
	UserOps

	numCapabilities // keep last
)

var capabilityNames = [...]string{
	AllReduceCoalesced:  "AllReduceCoalesced",
	AllGatherCoalesced:  "AllGatherCoalesced",
	AllGatherIntoTensor: "AllGatherIntoTensor",
	ReduceScatterTensor: "ReduceScatterTensor",
	InferenceAllReduce:  "InferenceAllReduce",
	MonitoredBarrier:    "MonitoredBarrier",
	AnySourceRecv:       "AnySourceRecv",
	RecvUpTo:            "RecvUpTo",
	UserOps:             "UserOps",
}

// String names the capability as its constant is named (Capability(n) for
// a value no constant has).
func (c Capability) String() string {
	if c > 0 && c < numCapabilities {
		return capabilityNames[c]
	}
	return fmt.Sprintf("Capability(%d)", uint8(c))
}

// Capabilities is implemented by communicators that say which optional
// features they offer. Supports must be safe for concurrent use and must
// not change over the communicator's life.
type Capabilities interface {
	Supports(Capability) bool
}

// BaseCapabilities reports what every backend offers without saying so:
// the features that predate the Capabilities interface (everything but
// RecvUpTo and UserOps).
func BaseCapabilities(c Capability) bool {
	switch c {
	case AllReduceCoalesced, AllGatherCoalesced, AllGatherIntoTensor, ReduceScatterTensor,
		InferenceAllReduce, MonitoredBarrier, AnySourceRecv:
		return true
	}
	return false
}

// AllCapabilities lists every Capability, in order.
func AllCapabilities() []Capability {
	all := make([]Capability, 0, numCapabilities-1)
	for c := Capability(1); c < numCapabilities; c++ {
		all = append(all, c)
	}
	return all
}
