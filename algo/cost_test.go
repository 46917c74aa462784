package algo

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gocomm/comm/core"
)

func TestChoose(t *testing.T) {
	const es = 4
	tests := []struct {
		kind  core.Kind
		size  int
		bytes int
		want  Algorithm
		chunk int
	}{
		{core.KindAllReduce, 4, 0, RecursiveDoubling, 0},
		{core.KindAllReduce, 4, SmallMessage, RecursiveDoubling, 0},
		{core.KindAllReduce, 4, SmallMessage + 1, Ring, 0},
		{core.KindAllReduce, 2, 64 << 20, Ring, 0},
		{core.KindAllGather, 4, SmallMessage, RecursiveDoubling, 0},
		{core.KindAllGather, 4, SmallMessage + 1, Ring, 0},
		{core.KindAllGatherV, 3, SmallMessage + 1, Ring, 0},
		{core.KindBroadcast, 4, LargeMessage, Tree, 0},
		{core.KindBroadcast, 4, LargeMessage + 1, Ring, PipelineChunk / es},
		{core.KindBroadcast, 3, LargeMessage + 1, Ring, PipelineChunk / es},
		{core.KindBroadcast, 2, 64 << 20, Tree, 0}, // two ranks: nothing to pipeline through
		{core.KindReduce, 8, 64 << 20, Tree, 0},
		{core.KindReduceScatter, 4, 8, Ring, 0},
		{core.KindReduceScatterV, 4, 64 << 20, Ring, 0},
		{core.KindGather, 4, LargeMessage, Tree, 0},
		{core.KindGather, 4, LargeMessage + 1, Linear, 0},
		{core.KindGatherV, 4, LargeMessage + 1, Linear, 0},
		{core.KindScatter, 4, LargeMessage, Tree, 0},
		{core.KindScatterV, 4, LargeMessage + 1, Linear, 0},
		{core.KindAllToAll, 4, 8, Pairwise, 0},
		{core.KindAllToAllV, 4, 64 << 20, Pairwise, 0},
		{core.KindBarrier, 4, 0, RecursiveDoubling, 0},
		{core.KindSend, 2, 8, Auto, 0},
		{core.KindMonitoredBarrier, 4, 0, Auto, 0},
		{core.Kind(200), 4, 8, Auto, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/size=%d/bytes=%d", tt.kind, tt.size, tt.bytes), func(t *testing.T) {
			a, chunk := Choose(tt.kind, tt.size, tt.bytes, es)
			if a != tt.want || chunk != tt.chunk {
				t.Errorf("Choose = %v, chunk %d; want %v, chunk %d", a, chunk, tt.want, tt.chunk)
			}
		})
	}
}

// TestChooseIsPlannable: whatever the cost model picks, the plan function
// of the kind can build, on every rank, around every threshold.
func TestChooseIsPlannable(t *testing.T) {
	const es = 4
	for _, size := range []int{2, 3, 4, 5, 8} {
		for _, th := range Thresholds {
			for _, bytes := range []int{th - es, th, th + es} {
				n := bytes / es
				counts := EvenCounts(n, size)
				for _, kind := range []core.Kind{core.KindAllReduce, core.KindReduce, core.KindBroadcast, core.KindAllGatherV,
					core.KindGatherV, core.KindScatterV, core.KindReduceScatterV, core.KindAllToAllV, core.KindBarrier} {
					a, chunk := Choose(kind, size, bytes, es)
					for rank := range size {
						var err error
						switch kind {
						case core.KindAllReduce:
							_, err = AllReduce(a, rank, size, n, chunk)
						case core.KindReduce:
							_, err = Reduce(a, rank, size, size-1, n)
						case core.KindBroadcast:
							_, err = Broadcast(a, rank, size, size-1, n, chunk)
						case core.KindAllGatherV:
							_, err = AllGather(a, rank, size, counts)
						case core.KindGatherV:
							_, err = Gather(a, rank, size, 0, counts)
						case core.KindScatterV:
							_, err = Scatter(a, rank, size, 0, counts)
						case core.KindReduceScatterV:
							_, err = ReduceScatter(a, rank, size, counts)
						case core.KindAllToAllV:
							_, err = AllToAll(a, rank, size, counts, counts)
						case core.KindBarrier:
							_, err = Barrier(a, rank, size)
						}
						if err != nil {
							t.Fatalf("%v of %d bytes on %d ranks: Choose picked %v (chunk %d), rank %d cannot plan it: %v", kind, bytes, size, a, chunk, rank, err)
						}
					}
				}
			}
		}
	}
}

// TestMessageBytesIgnoresRootOnlyBuffers: for the rooted collectives the
// size (and so the choice) is the same whatever the buffers only the root
// passes hold on the other ranks: nil, the full length, or anything.
func TestMessageBytesIgnoresRootOnlyBuffers(t *testing.T) {
	const es = 4
	for _, size := range []int{2, 3, 4, 8} {
		for _, per := range []int{1, 16 << 10, LargeMessage / es / size, LargeMessage/es/size + 1, 1 << 20} {
			counts := slices.Repeat([]int{per}, size)
			total := per * size * es
			mine := per * es // this rank's block
			for _, kind := range []core.Kind{core.KindGather, core.KindGatherV, core.KindScatter, core.KindScatterV, core.KindReduce} {
				t.Run(fmt.Sprintf("%v/size=%d/per=%d", kind, size, per), func(t *testing.T) {
					full := total
					if kind == core.KindReduce {
						full = mine
					}
					var sizes []int
					var choices []Algorithm
					for _, rootOnly := range []int{0, full, 3, 5 * total} {
						send, recv := mine, rootOnly // gathers and reduce: Recv is the root's
						if kind == core.KindScatter || kind == core.KindScatterV {
							send, recv = rootOnly, mine // scatters: Send is the root's
						}
						b := MessageBytes(kind, es, counts, send, recv)
						a, _ := Choose(kind, size, b, es)
						sizes, choices = append(sizes, b), append(choices, a)
					}
					if d := slices.Compact(slices.Clone(sizes)); len(d) != 1 {
						t.Errorf("the size depends on a root-only buffer: %v", sizes)
					}
					if d := slices.Compact(slices.Clone(choices)); len(d) != 1 {
						t.Errorf("the choice depends on a root-only buffer: %v", choices)
					}
					want := total
					if kind == core.KindReduce {
						want = mine
					}
					if sizes[0] != want {
						t.Errorf("MessageBytes = %d, want %d", sizes[0], want)
					}
				})
			}
		}
	}
}

func TestMessageBytesUnrooted(t *testing.T) {
	tests := []struct {
		kind       core.Kind
		send, recv int
		want       int
	}{
		{core.KindAllReduce, 1024, 1024, 1024},
		{core.KindBroadcast, 0, 4096, 4096},
		{core.KindAllGather, 256, 1024, 1024},
		{core.KindReduceScatter, 1024, 256, 1024},
		{core.KindAllToAll, 1024, 2048, 2048},
	}
	for _, tt := range tests {
		if got := MessageBytes(tt.kind, 4, []int{1, 2}, tt.send, tt.recv); got != tt.want {
			t.Errorf("MessageBytes(%v, send %d, recv %d) = %d, want %d", tt.kind, tt.send, tt.recv, got, tt.want)
		}
	}
}
