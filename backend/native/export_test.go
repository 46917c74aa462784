package native

import (
	"slices"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
)

// Sizes at which the engine changes what it does, for the tests of package
// native_test (which may import the conformance suite): the cost model's
// (algo.Thresholds) and the engine's own.
var EngineThresholds = append(slices.Clone(algo.Thresholds), lazyMinBytes, inlineSendBytes, crowdedTreeBytes, crowdedLinearBytes, crowdedTCPLinearMax, crowdedTCPHalvingMin, boardAllReduceMax, boardReduceMax, boardBroadcastMax, boardAllGatherMax, stageBroadcastMin, stageBroadcastCrowdedMin)

// Sizes at which only the engine's all-reduce changes what it does.
var EngineAllReduceThresholds = []int{crowdedTCPHalvingMax}

// FlatChoice is the cost model's choice for req on rank of a communicator of
// size ranks.
func FlatChoice(rank, size int, req *backend.Request) algo.Algorithm {
	c := &Comm{rank: rank, size: size}
	return c.flatChoice(req)
}
