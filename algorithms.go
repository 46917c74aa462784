package comm

import "github.com/gocomm/comm/core"

// Algorithm names a family of collective schedules, for forcing one
// through Options.Algorithms (or GOCOMM_ALGO_<OP>, e.g.
// GOCOMM_ALGO_ALLREDUCE=ring). The zero value lets the backend's cost
// model choose. Its String is the name GOCOMM_ALGO_<OP> accepts and
// profiles report.
type Algorithm = core.Algorithm

// The algorithms a collective can be forced to use; package algo's plans
// say which operations each covers.
const (
	Ring              = core.Ring
	RecursiveDoubling = core.RecursiveDoubling
	HalvingDoubling   = core.HalvingDoubling
	Tree              = core.Tree
	Pairwise          = core.Pairwise
	Linear            = core.Linear
	// Hierarchical composes plans on sub-communicators: inside each host,
	// between one leader per host, then inside each host again.
	Hierarchical = core.Hierarchical
)

// Algorithms forces the algorithm of each kind of collective, one field
// per kind: AllReduce, Reduce, Broadcast, AllGather, ReduceScatter,
// Gather, Scatter, AllToAll and Barrier (the V variants share their base
// kind's). A zero field leaves that kind to the cost model:
//
//	comm.Options{Algorithms: comm.Algorithms{AllReduce: comm.Ring}}
type Algorithms = core.Algorithms
