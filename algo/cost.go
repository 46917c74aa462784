package algo

import "github.com/gocomm/comm/core"

// Thresholds of the cost model, in bytes of the message size MessageBytes
// measures. Small messages go to latency-first schedules (log2 n rounds),
// large ones to bandwidth-optimal rings or linear fans.
const (
	// SmallMessage is the largest all-reduce or all-gather that takes
	// RecursiveDoubling; above it they take Ring.
	SmallMessage = 64 << 10
	// LargeMessage is the largest broadcast that takes Tree (on more than
	// two ranks) and the largest gather or scatter that takes Tree; above
	// it broadcasts take a pipelined Ring and gathers and scatters Linear.
	LargeMessage = 1 << 20
	// PipelineChunk is the piece size, in bytes, of pipelined broadcasts.
	PipelineChunk = 512 << 10
)

// Thresholds lists every size, in bytes, at which Choose changes its
// answer or the answer's pieces, for tests that must run around each of
// them. Read only.
var Thresholds = []int{SmallMessage, LargeMessage, PipelineChunk}

// MessageBytes is the message size the cost model sees for one collective
// of kind: elemSize-byte elements, per-rank counts (the kinds that take
// them), and the lengths in bytes of the caller's send and receive
// buffers. Every rank of a collective must choose the same schedule, so
// the size comes only from arguments all ranks share: the counts of the
// rooted collectives (gather, scatter and their V forms) and the send
// buffer of reduce, never the buffers only the root passes (other ranks
// may pass nil, or anything, there). Pure: it reads nothing else and keeps
// nothing.
func MessageBytes(kind core.Kind, elemSize int, counts []int, sendBytes, recvBytes int) int {
	switch kind {
	case core.KindGather, core.KindGatherV, core.KindScatter, core.KindScatterV:
		n := 0
		for _, c := range counts {
			n += c
		}
		return n * elemSize
	case core.KindReduce:
		return sendBytes
	}
	return max(sendBytes, recvBytes)
}

// Choose is the cost model of flat schedules (over the whole communicator,
// no topology): the algorithm for a collective of kind on size ranks whose
// message is bytes long (MessageBytes) in elemSize-byte elements. chunk is
// the piece size, in elements, a pipelined schedule should cut its message
// into, or 0 for whole messages; the caller uses it only if it has no piece
// size of its own. Auto means the kind has no flat schedule (point to
// point, monitored barrier, unknown kinds). Pure: every rank given the same
// arguments gets the same answer.
func Choose(kind core.Kind, size, bytes, elemSize int) (a Algorithm, chunk int) {
	switch kind {
	case core.KindAllReduce:
		if bytes <= SmallMessage {
			return RecursiveDoubling, 0
		}
		// Cutting ring messages into pipelined pieces was no faster over
		// TCP, so whole blocks it is.
		return Ring, 0
	case core.KindBroadcast:
		if bytes > LargeMessage && size > 2 {
			return Ring, PipelineChunk / max(elemSize, 1)
		}
		return Tree, 0
	case core.KindReduce:
		return Tree, 0
	case core.KindAllGather, core.KindAllGatherV:
		if bytes <= SmallMessage {
			return RecursiveDoubling, 0
		}
		return Ring, 0
	case core.KindReduceScatter, core.KindReduceScatterV:
		return Ring, 0
	case core.KindGather, core.KindGatherV, core.KindScatter, core.KindScatterV:
		if bytes > LargeMessage {
			return Linear, 0
		}
		return Tree, 0
	case core.KindAllToAll, core.KindAllToAllV:
		return Pairwise, 0
	case core.KindBarrier:
		return RecursiveDoubling, 0
	}
	return Auto, 0
}
