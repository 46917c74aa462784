package core

import (
	"fmt"
	"strings"
)

// Algorithm names a family of schedules. Its numbering is stable (it appears
// in profiles and traces).
type Algorithm uint8

// Algorithms. Auto lets the caller's cost model choose.
const (
	Auto Algorithm = iota
	Ring
	RecursiveDoubling
	HalvingDoubling
	Tree
	Pairwise
	Linear
	// Hierarchical is not a plan of this package: the engine composes it
	// from plans on sub-communicators (inside each host, then between one
	// leader per host, then inside each host again). Plan functions refuse
	// it.
	Hierarchical
	// SharedBoard is not a plan either: the native engine runs small
	// collectives of a world on one host on the native backend's
	// shared-memory board when no algorithm is forced. It is reported as the
	// algorithm used, and cannot be forced.
	SharedBoard
	// SharedStage is the board's stage: all-reduces above the board's
	// size, of a world on one host, through the native backend's
	// shared-memory board, when no algorithm is forced. Reported,
	// never forced.
	SharedStage
	// SharedDirect is the all-reduce of buffers that every rank allocated
	// with comm.AllocShared: each rank reads its stripe of every input in
	// place and writes it into every result, on the native backend's
	// shared-memory board. Reported, never forced.
	SharedDirect
)

var algorithmNames = [...]string{
	Auto: "auto", Ring: "ring", RecursiveDoubling: "recursive-doubling",
	HalvingDoubling: "halving-doubling", Tree: "tree", Pairwise: "pairwise", Linear: "linear",
	Hierarchical: "hierarchical", SharedBoard: "shared-board",
	SharedStage: "shared-stage", SharedDirect: "shared-direct",
}

func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm is the inverse of String; it also accepts "rd" and "hd".
func ParseAlgorithm(s string) (Algorithm, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "", "auto":
		return Auto, nil
	case "rd":
		return RecursiveDoubling, nil
	case "hd", "rabenseifner":
		return HalvingDoubling, nil
	case "shared-board", "shared-stage", "shared-direct":
		return Auto, fmt.Errorf("algo: %q cannot be forced: the native backend runs small collectives of a world on one host there by itself, when no algorithm is forced", s)
	}
	for i, n := range algorithmNames {
		if n == s {
			return Algorithm(i), nil
		}
	}
	return Auto, fmt.Errorf("algo: unknown algorithm %q (want one of auto, ring, recursive-doubling, halving-doubling, tree, pairwise, linear, hierarchical)", s)
}

// Set implements flag.Value.
func (a *Algorithm) Set(s string) error {
	v, err := ParseAlgorithm(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Algorithms forces the algorithm of each kind of collective; Auto (the
// zero value) leaves the choice to the backend's cost model.
type Algorithms struct {
	AllReduce, Reduce, Broadcast, AllGather, ReduceScatter,
	Gather, Scatter, AllToAll, Barrier Algorithm
}

// For returns the override for kind k (V variants share their base kind's).
func (a Algorithms) For(k Kind) Algorithm {
	switch k {
	case KindAllReduce:
		return a.AllReduce
	case KindReduce:
		return a.Reduce
	case KindBroadcast:
		return a.Broadcast
	case KindAllGather, KindAllGatherV:
		return a.AllGather
	case KindReduceScatter, KindReduceScatterV:
		return a.ReduceScatter
	case KindGather, KindGatherV:
		return a.Gather
	case KindScatter, KindScatterV:
		return a.Scatter
	case KindAllToAll, KindAllToAllV:
		return a.AllToAll
	case KindBarrier:
		return a.Barrier
	}
	return Auto
}
