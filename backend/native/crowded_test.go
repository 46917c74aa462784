package native

import (
	"testing"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/transport"
)

// sharing is an endpoint that shares memory with the world ranks in local.
type sharing struct {
	transport.Endpoint
	local map[int]bool
}

func (s sharing) SharedMemory(peer int) bool { return s.local[peer] }

// overTCP is an endpoint that reaches every peer over TCP and places the
// world ranks on hosts.
type overTCP struct {
	transport.Endpoint
	host map[int]int
}

func (o overTCP) SharedMemory(int) bool { return false }
func (o overTCP) HostOf(rank int) int   { return o.host[rank] }

// TestCrowdedTCP: on a crowded host whose ranks reach each other over
// TCP, an all-reduce of up to crowdedTCPLinearMax takes the linear
// schedule, at every size the cost model gives recursive doubling or the
// ring, and one from crowdedTCPHalvingMin below crowdedTCPHalvingMax
// halving-doubling if the ranks are a power of two; a broadcast the cost
// model pipelines through the ring takes the linear schedule (smaller
// ones keep the tree); neither when a rank is on another host, nor with
// as many ranks as CPUs.
func TestCrowdedTCP(t *testing.T) {
	defer func(f func() int) { numCPU = f }(numCPU)
	numCPU = func() int { return 2 }
	oneHost := map[int]int{0: 0, 1: 0, 2: 0, 3: 0}
	elsewhere := map[int]int{0: 0, 1: 0, 2: 0, 3: 1}
	oneHost3 := map[int]int{0: 0, 1: 0, 2: 0}
	large := algo.LargeMessage + 4
	ring := algo.PipelineChunk / 4 // the pipelined broadcast's piece, in float32 elements
	const ar, bc = core.KindAllReduce, core.KindBroadcast
	for _, tt := range []struct {
		name      string
		kind      core.Kind
		local     int
		host      map[int]int
		bytes     int
		want      algo.Algorithm
		wantChunk int
	}{
		{"4 ranks on 2 CPUs, 8 B", ar, 4, oneHost, 8, algo.Linear, 0},
		{"4 ranks on 2 CPUs, 4 KiB", ar, 4, oneHost, 4 << 10, algo.Linear, 0},
		{"4 ranks on 2 CPUs, 128 KiB", ar, 4, oneHost, crowdedTCPLinearMax, algo.Linear, 0},
		{"4 ranks on 2 CPUs, above 128 KiB", ar, 4, oneHost, crowdedTCPLinearMax + 4, algo.Ring, 0},
		{"4 ranks on 2 CPUs, below 512 KiB", ar, 4, oneHost, crowdedTCPHalvingMin - 4, algo.Ring, 0},
		{"4 ranks on 2 CPUs, 512 KiB", ar, 4, oneHost, crowdedTCPHalvingMin, algo.HalvingDoubling, 0},
		{"4 ranks on 2 CPUs, below 4 MiB", ar, 4, oneHost, crowdedTCPHalvingMax - 4, algo.HalvingDoubling, 0},
		{"4 ranks on 2 CPUs, 4 MiB", ar, 4, oneHost, crowdedTCPHalvingMax, algo.Ring, 0},
		{"3 ranks on 2 CPUs, 1 MiB", ar, 3, oneHost3, 1 << 20, algo.Ring, 0},
		{"a rank on another host, 1 MiB", ar, 4, elsewhere, 1 << 20, algo.Ring, 0},
		{"a rank on another host", ar, 4, elsewhere, 8, algo.RecursiveDoubling, 0},
		{"2 ranks on 2 CPUs", ar, 2, oneHost, 8, algo.RecursiveDoubling, 0},
		{"broadcast, 4 ranks on 2 CPUs, 1 MiB", bc, 4, oneHost, algo.LargeMessage, algo.Tree, 0},
		{"broadcast, 4 ranks on 2 CPUs, above 1 MiB", bc, 4, oneHost, large, algo.Linear, 0},
		{"broadcast, 4 ranks on 2 CPUs, 64 MiB", bc, 4, oneHost, 64 << 20, algo.Linear, 0},
		{"broadcast, a rank on another host", bc, 4, elsewhere, large, algo.Ring, ring},
		{"broadcast, 2 ranks on 2 CPUs", bc, 2, oneHost, large, algo.Ring, ring},
	} {
		members := []int{0, 1, 2, 3}[:len(tt.host)]
		c := &Comm{ep: overTCP{host: tt.host}, cfg: backend.Config{LocalSize: tt.local}, rank: 0, size: len(members), members: members}
		buf := make([]byte, tt.bytes)
		req := &backend.Request{Kind: tt.kind, DType: core.Float32, Op: core.Sum, Send: buf, Recv: buf}
		if tt.kind == bc {
			req.Send = nil
		}
		if got := c.flatChoice(req); got != tt.want || req.Chunk != tt.wantChunk {
			t.Errorf("%s: %v in pieces of %d, want %v in pieces of %d", tt.name, got, req.Chunk, tt.want, tt.wantChunk)
		}
	}
}

// TestCrowdedHost: an all-reduce from crowdedTreeBytes up takes the tree,
// from crowdedLinearBytes the linear schedule, when the host's ranks
// outnumber its CPUs by at most two to one and every rank of the
// communicator shares memory; recursive doubling otherwise, and the ring
// above the cost model's small-message size either way.
func TestCrowdedHost(t *testing.T) {
	defer func(f func() int) { numCPU = f }(numCPU)
	numCPU = func() int { return 2 }
	allLocal := map[int]bool{0: true, 1: true, 2: true, 3: true}
	for _, tt := range []struct {
		name  string
		local int          // ranks on the host
		share map[int]bool // world ranks sharing memory with rank 0
		bytes int
		want  algo.Algorithm
	}{
		{"4 ranks on 2 CPUs, 4 KiB", 4, allLocal, 4 << 10, algo.Tree},
		{"4 ranks on 2 CPUs, 1 KiB", 4, allLocal, crowdedTreeBytes, algo.Tree},
		{"4 ranks on 2 CPUs, 8 KiB", 4, allLocal, crowdedLinearBytes, algo.Linear},
		{"4 ranks on 2 CPUs, 64 KiB", 4, allLocal, algo.SmallMessage, algo.Linear},
		{"4 ranks on 2 CPUs, above 64 KiB", 4, allLocal, algo.SmallMessage + 4, algo.Ring},
		{"4 ranks on 2 CPUs, 512 B", 4, allLocal, 512, algo.RecursiveDoubling},
		{"3 ranks on 2 CPUs, 32 KiB", 3, allLocal, 32 << 10, algo.Linear},
		{"2 ranks on 2 CPUs", 2, allLocal, 4 << 10, algo.RecursiveDoubling},
		{"5 ranks on 2 CPUs", 5, allLocal, 4 << 10, algo.RecursiveDoubling},
		{"a rank on another host", 4, map[int]bool{0: true, 1: true, 2: true}, 4 << 10, algo.RecursiveDoubling},
		{"above the cost model's ring size", 2, allLocal, algo.SmallMessage + 4, algo.Ring},
	} {
		c := &Comm{ep: sharing{local: tt.share}, cfg: backend.Config{LocalSize: tt.local}, rank: 0, size: 4, members: []int{0, 1, 2, 3}}
		buf := make([]byte, tt.bytes)
		req := &backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Op: core.Sum, Send: buf, Recv: buf}
		if got := c.flatChoice(req); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
		bc := &backend.Request{Kind: core.KindBroadcast, DType: core.Float32, Recv: buf}
		if got, want := c.flatChoice(bc), (&Comm{rank: 0, size: 4}).flatChoice(bc); got != want {
			t.Errorf("%s: broadcast %v, want the cost model's %v", tt.name, got, want)
		}
	}
}
