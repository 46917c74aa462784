package comm

import "github.com/gocomm/comm/backend"

// Capability names an optional feature a communicator may offer; see
// (*Comm).Supports. DeepSpeed's queries map to it as
//
//	has_all_reduce_coalesced()   c.Supports(comm.CapAllReduceCoalesced)
//	has_all_gather_into_tensor() c.Supports(comm.CapAllGatherIntoTensor)
//	has_reduce_scatter_tensor()  c.Supports(comm.CapReduceScatterTensor)
//
// torch's has_coalescing_manager has no counterpart: gocomm offers the
// coalesced collectives and StartBatchSendRecv instead of a general
// manager.
type Capability = backend.Capability

// The capabilities (see package backend for each one's meaning).
const (
	CapAllReduceCoalesced  = backend.AllReduceCoalesced
	CapAllGatherCoalesced  = backend.AllGatherCoalesced
	CapAllGatherIntoTensor = backend.AllGatherIntoTensor
	CapReduceScatterTensor = backend.ReduceScatterTensor
	CapInferenceAllReduce  = backend.InferenceAllReduce
	CapMonitoredBarrier    = backend.MonitoredBarrier
	CapAnySourceRecv       = backend.AnySourceRecv
	CapRecvUpTo            = backend.RecvUpTo
	// CapUserOps: collectives on the communicator run ops made by NewOp
	// (the mpi backend's do not; PreMulSum's ops run everywhere).
	CapUserOps = backend.UserOps
)

// Capabilities lists every Capability, in order.
func Capabilities() []Capability { return backend.AllCapabilities() }

// Backend is the name of the backend driver the world was opened with
// ("native", "mpi", or a name given to backend.Register), as torch's
// get_backend returns it; a group answers for its world. Safe for concurrent use.
func (c *Comm) Backend() string {
	if c == nil {
		return ""
	}
	return c.root().backendName
}

// Supports reports whether operations needing cp work on c: the backend
// says so if it implements backend.Capabilities, else it offers
// backend.BaseCapabilities. It is false for every capability on a group
// this rank is not a member of, and for values that name no capability.
// The answer is the same on every rank of a world built from one driver
// and transport, and does not change; safe for concurrent use.
func (c *Comm) Supports(cp Capability) bool {
	if c == nil || c.be == nil {
		return false
	}
	if cp == CapUserOps {
		return c.userOps() == nil
	}
	if bc, ok := c.be.(backend.Capabilities); ok {
		return bc.Supports(cp)
	}
	return backend.BaseCapabilities(cp)
}
