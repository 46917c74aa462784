package native_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/backend/native"
	"github.com/gocomm/comm/conformance"
	"github.com/gocomm/comm/core"
)

// TestEngineThresholdsHaveConformanceCases keeps the conformance suite's
// threshold cases in step with the engine: a size at which the engine
// changes its mind must be one the suite runs around.
func TestEngineThresholdsHaveConformanceCases(t *testing.T) {
	for _, b := range native.EngineThresholds {
		if !slices.Contains(conformance.Thresholds, b) {
			t.Errorf("the engine changes behaviour at %d bytes, but conformance.Thresholds (%v) has no cases around it", b, conformance.Thresholds)
		}
	}
	for _, b := range native.EngineAllReduceThresholds {
		if !slices.Contains(conformance.Thresholds, b) && !slices.Contains(conformance.AllReduceThresholds, b) {
			t.Errorf("the engine's all-reduce changes behaviour at %d bytes, but neither conformance.Thresholds (%v) nor conformance.AllReduceThresholds (%v) has cases around it", b, conformance.Thresholds, conformance.AllReduceThresholds)
		}
	}
}

// TestChoiceIgnoresRootOnlyBuffers: every rank of a rooted collective must
// choose the same schedule whether it passes nil, a full buffer or any
// other length where only the root's buffer is read.
func TestChoiceIgnoresRootOnlyBuffers(t *testing.T) {
	const es = 4
	for _, size := range []int{2, 3, 4, 8} {
		for _, per := range []int{1, 16 << 10, (1 << 20) / es / size, (1<<20)/es/size + 1, 1 << 20} {
			counts := slices.Repeat([]int{per}, size)
			total := per * size * es
			for _, kind := range []core.Kind{core.KindGather, core.KindGatherV, core.KindScatter, core.KindScatterV, core.KindReduce} {
				t.Run(fmt.Sprintf("%v/size=%d/per=%d", kind, size, per), func(t *testing.T) {
					mine := make([]byte, per*es) // this rank's block
					full := make([]byte, total)
					if kind == core.KindReduce {
						full = mine
					}
					rootOnly := [][]byte{nil, full, make([]byte, 3)}
					var choices []string
					for rank := range size {
						for _, other := range rootOnly {
							req := &backend.Request{Kind: kind, DType: core.Int32, Root: 0, Counts: counts}
							switch kind {
							case core.KindScatter, core.KindScatterV:
								req.Send, req.Recv = other, mine
								if rank == 0 {
									req.Send = full
								}
							default:
								req.Send, req.Recv = mine, other
								if rank == 0 {
									req.Recv = full
								}
							}
							choices = append(choices, native.FlatChoice(rank, size, req).String())
						}
					}
					slices.Sort(choices)
					if distinct := slices.Compact(choices); len(distinct) != 1 {
						t.Fatalf("ranks chose different schedules: %v", distinct)
					}
				})
			}
		}
	}
}
