package comm

import (
	"context"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// Every collective below comes in a blocking form and a Start form that
// returns a *Work. The blocking form is the Start form, waited. All ranks of
// the communicator must call the same collectives in the same order with
// agreeing arguments (counts, root, op, type); a disagreement is reported as
// ErrMismatch (or ErrLength) on the ranks that see it, and the world is
// aborted. Ranks and roots are ranks of the communicator c.

// AllReduce combines send across all ranks with op and leaves the result in
// recv on every rank. send and recv have the same length; pass the same
// slice for an in-place all-reduce.
func AllReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	if ran, err := allReduceInline(ctx, c, send, recv, op); ran {
		return err
	}
	return startAllReduce(ctx, c, send, recv, op, algo.Auto).sync()
}

// allReduceInline runs AllReduce straight on the backend when it can
// (backend.Inliner: a small all-reduce on a shared-memory board), with
// the flight record and the op timeout of the general path but without
// its pooled Work and request and its dispatch through Run, which are a
// measurable share of a small all-reduce (docs/performance.md). The
// backend tells the flight recorder of the operation from inside it
// (inlineRecord), its start once the operation waits for its peers.
// Anything the general path
// would refuse or treat specially (invalid arguments, a user-defined op,
// the comms logger, a closed communicator) goes there.
func allReduceInline[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) (bool, error) {
	if c == nil || c.inline == nil || ctx == nil || (profileHook && c.prof != nil) {
		return false, nil
	}
	dt := dtypeOf[T]()
	sb, rb := asBytes(send), asBytes(recv)
	if len(send) != len(recv) || op.IsUser() || !op.ValidFor(dt) || !c.inline.InlinesAllReduce(len(rb)) ||
		checkOverlap(core.KindAllReduce, send, recv, true) != nil {
		return false, nil
	}
	seq, err := c.nextSeq()
	if err != nil {
		return false, nil
	}
	var rec backend.InlineRecorder
	if c.rec != nil {
		rec = &c.inlineRec
	}
	ran, err := c.inline.InlineAllReduce(ctx, c.timeout, seq, dt, op, sb, rb, len(recv), rec)
	if ran && err == nil {
		return true, nil
	}
	req := backend.Request{Kind: core.KindAllReduce, Seq: seq, DType: dt, Op: op, Peer: -1, Send: sb, Recv: rb, SigCount: len(recv), Source: -1}
	if !ran {
		// Not seq's turn yet (an operation started before it runs), or
		// the communicator closed: Run waits, or says so.
		var ticket flightTicket
		if c.rec != nil {
			ticket = c.rec.enter(&req)
		}
		r := req // a copy: req itself stays on the stack
		err = c.run(ctx, &r)
		if c.rec != nil {
			c.rec.exit(ticket, err)
		}
	}
	if err != nil && c.rec != nil {
		failed := req // a copy: req itself stays on the stack
		err = c.explainFailure(&failed, err)
	}
	return true, err
}

// StartAllReduce is AllReduce, asynchronous.
func StartAllReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) *Work {
	return startAllReduce(ctx, c, send, recv, op, algo.Auto).async()
}

// InferenceAllReduce is a latency-first AllReduce for small messages (as in
// deepspeed.comm.inference_all_reduce, but honouring op and group): it skips
// the cost model and runs recursive doubling, log2(n) rounds of whole-vector
// exchanges.
func InferenceAllReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	return startAllReduce(ctx, c, send, recv, op, algo.RecursiveDoubling).sync()
}

// StartInferenceAllReduce is InferenceAllReduce, asynchronous.
func StartInferenceAllReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) *Work {
	return startAllReduce(ctx, c, send, recv, op, algo.RecursiveDoubling).async()
}

func startAllReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp, a algo.Algorithm) *Work {
	if w := c.unusable(core.KindAllReduce); w != nil {
		return w
	}
	req := c.request(core.KindAllReduce, dtypeOf[T](), op, 0, asBytes(send), asBytes(recv))
	req.Algorithm = a
	req.SigCount = len(recv)
	var err error
	switch {
	case len(send) != len(recv):
		err = invalid(req.Kind, "len(send) = %d but len(recv) = %d: they must be equal", len(send), len(recv))
	default:
		err = checkOverlap(req.Kind, send, recv, true)
	}
	if err == nil {
		err = c.reduceOp(req, op) // userop.go
	}
	return c.startCollective(ctx, req, err)
}

// Reduce combines send across all ranks with op into recv on root. recv is
// read only on root (len(recv) == len(send)); other ranks may pass nil.
func Reduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp, root int) error {
	return startReduce(ctx, c, send, recv, op, root).sync()
}

// StartReduce is Reduce, asynchronous.
func StartReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp, root int) *Work {
	return startReduce[T](ctx, c, send, recv, op, root).async()
}

func startReduce[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp, root int) *Work {
	if w := c.unusable(core.KindReduce); w != nil {
		return w
	}
	req := c.request(core.KindReduce, dtypeOf[T](), op, root, asBytes(send), asBytes(recv))
	req.SigCount = len(send)
	err := c.checkRoot(req.Kind, root)
	if err == nil && c.rank == root {
		if len(recv) != len(send) {
			err = invalid(req.Kind, "on the root len(recv) = %d but len(send) = %d: they must be equal", len(recv), len(send))
		} else {
			err = checkOverlap(req.Kind, send, recv, true)
		}
	}
	if err == nil {
		err = c.reduceOp(req, op) // userop.go
	}
	return c.startCollective(ctx, req, err)
}

// Broadcast copies buf from root to every other rank's buf.
func Broadcast[T Numeric](ctx context.Context, c *Comm, buf []T, root int) error {
	return startBroadcast(ctx, c, buf, root).sync()
}

// StartBroadcast is Broadcast, asynchronous.
func StartBroadcast[T Numeric](ctx context.Context, c *Comm, buf []T, root int) *Work {
	return startBroadcast[T](ctx, c, buf, root).async()
}

func startBroadcast[T Numeric](ctx context.Context, c *Comm, buf []T, root int) *Work {
	if w := c.unusable(core.KindBroadcast); w != nil {
		return w
	}
	b := asBytes(buf)
	req := c.request(core.KindBroadcast, dtypeOf[T](), Sum, root, b, b)
	req.SigCount = len(buf)
	return c.startCollective(ctx, req, c.checkRoot(req.Kind, root))
}

// AllGather concatenates every rank's send, in rank order, into recv on
// every rank: len(recv) == Size()*len(send). send may be this rank's own
// block of recv (in place).
func AllGather[T Numeric](ctx context.Context, c *Comm, send, recv []T) error {
	return startAllGather(ctx, c, send, recv).sync()
}

// StartAllGather is AllGather, asynchronous.
func StartAllGather[T Numeric](ctx context.Context, c *Comm, send, recv []T) *Work {
	return startAllGather[T](ctx, c, send, recv).async()
}

func startAllGather[T Numeric](ctx context.Context, c *Comm, send, recv []T) *Work {
	if w := c.unusable(core.KindAllGather); w != nil {
		return w
	}
	req := c.request(core.KindAllGather, dtypeOf[T](), Sum, 0, asBytes(send), asBytes(recv))
	req.SigCount = len(send)
	req.Counts = c.evenCounts(len(send))
	var err error
	if len(recv) != c.size*len(send) {
		err = invalid(req.Kind, "len(recv) = %d, want Size()*len(send) = %d*%d", len(recv), c.size, len(send))
	} else {
		err = checkOwnBlock(req.Kind, send, recv, c.rank*len(send))
	}
	return c.startCollective(ctx, req, err)
}

// AllGatherV is AllGather with a block of counts[r] elements from rank r:
// len(send) == counts[Rank()], len(recv) == sum(counts). Every rank passes
// the same counts.
func AllGatherV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int) error {
	return startAllGatherV(ctx, c, send, recv, counts).sync()
}

// StartAllGatherV is AllGatherV, asynchronous.
func StartAllGatherV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int) *Work {
	return startAllGatherV[T](ctx, c, send, recv, counts).async()
}

func startAllGatherV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int) *Work {
	if w := c.unusable(core.KindAllGatherV); w != nil {
		return w
	}
	req := c.request(core.KindAllGatherV, dtypeOf[T](), Sum, 0, asBytes(send), asBytes(recv))
	req.Counts = append([]int(nil), counts...)
	total, err := c.checkCounts(req.Kind, "counts", counts)
	req.SigCount = total
	if err == nil {
		switch {
		case len(send) != counts[c.rank]:
			err = invalid(req.Kind, "len(send) = %d but counts[%d] = %d", len(send), c.rank, counts[c.rank])
		case len(recv) != total:
			err = invalid(req.Kind, "len(recv) = %d but sum(counts) = %d", len(recv), total)
		default:
			err = checkOwnBlock(req.Kind, send, recv, algo.Offsets(counts)[c.rank])
		}
	}
	return c.startCollective(ctx, req, err)
}

// Gather concatenates every rank's send, in rank order, into recv on root
// (len(recv) == Size()*len(send)); other ranks may pass a nil recv.
func Gather[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return startGather(ctx, c, send, recv, root).sync()
}

// StartGather is Gather, asynchronous.
func StartGather[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) *Work {
	return startGather[T](ctx, c, send, recv, root).async()
}

func startGather[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) *Work {
	if w := c.unusable(core.KindGather); w != nil {
		return w
	}
	req := c.request(core.KindGather, dtypeOf[T](), Sum, root, asBytes(send), asBytes(recv))
	req.SigCount = len(send)
	req.Counts = c.evenCounts(len(send))
	err := c.checkRoot(req.Kind, root)
	if err == nil && c.rank == root {
		if len(recv) != c.size*len(send) {
			err = invalid(req.Kind, "on the root len(recv) = %d, want Size()*len(send) = %d*%d", len(recv), c.size, len(send))
		} else {
			err = checkOwnBlock(req.Kind, send, recv, c.rank*len(send))
		}
	}
	return c.startCollective(ctx, req, err)
}

// GatherV is Gather with counts[r] elements from rank r: len(send) ==
// counts[Rank()], and on root len(recv) == sum(counts).
func GatherV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) error {
	return startGatherV(ctx, c, send, recv, counts, root).sync()
}

// StartGatherV is GatherV, asynchronous.
func StartGatherV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) *Work {
	return startGatherV[T](ctx, c, send, recv, counts, root).async()
}

func startGatherV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) *Work {
	if w := c.unusable(core.KindGatherV); w != nil {
		return w
	}
	req := c.request(core.KindGatherV, dtypeOf[T](), Sum, root, asBytes(send), asBytes(recv))
	req.Counts = append([]int(nil), counts...)
	total, err := c.checkCounts(req.Kind, "counts", counts)
	req.SigCount = total
	if err == nil {
		err = c.checkRoot(req.Kind, root)
	}
	if err == nil {
		switch {
		case len(send) != counts[c.rank]:
			err = invalid(req.Kind, "len(send) = %d but counts[%d] = %d", len(send), c.rank, counts[c.rank])
		case c.rank == root && len(recv) != total:
			err = invalid(req.Kind, "on the root len(recv) = %d but sum(counts) = %d", len(recv), total)
		case c.rank == root:
			err = checkOwnBlock(req.Kind, send, recv, algo.Offsets(counts)[c.rank])
		}
	}
	return c.startCollective(ctx, req, err)
}

// Scatter sends block r of root's send (len(send) == Size()*len(recv)) to
// rank r's recv. Other ranks may pass a nil send.
func Scatter[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return startScatter(ctx, c, send, recv, root).sync()
}

// StartScatter is Scatter, asynchronous.
func StartScatter[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) *Work {
	return startScatter[T](ctx, c, send, recv, root).async()
}

func startScatter[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) *Work {
	if w := c.unusable(core.KindScatter); w != nil {
		return w
	}
	req := c.request(core.KindScatter, dtypeOf[T](), Sum, root, asBytes(send), asBytes(recv))
	req.SigCount = len(recv)
	req.Counts = c.evenCounts(len(recv))
	err := c.checkRoot(req.Kind, root)
	if err == nil && c.rank == root {
		if len(send) != c.size*len(recv) {
			err = invalid(req.Kind, "on the root len(send) = %d, want Size()*len(recv) = %d*%d", len(send), c.size, len(recv))
		} else {
			err = checkOwnBlock(req.Kind, recv, send, c.rank*len(recv))
		}
	}
	return c.startCollective(ctx, req, err)
}

// ScatterV is Scatter with counts[r] elements for rank r: on root
// len(send) == sum(counts); everywhere len(recv) == counts[Rank()].
func ScatterV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) error {
	return startScatterV(ctx, c, send, recv, counts, root).sync()
}

// StartScatterV is ScatterV, asynchronous.
func StartScatterV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) *Work {
	return startScatterV[T](ctx, c, send, recv, counts, root).async()
}

func startScatterV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) *Work {
	if w := c.unusable(core.KindScatterV); w != nil {
		return w
	}
	req := c.request(core.KindScatterV, dtypeOf[T](), Sum, root, asBytes(send), asBytes(recv))
	req.Counts = append([]int(nil), counts...)
	total, err := c.checkCounts(req.Kind, "counts", counts)
	req.SigCount = total
	if err == nil {
		err = c.checkRoot(req.Kind, root)
	}
	if err == nil {
		switch {
		case len(recv) != counts[c.rank]:
			err = invalid(req.Kind, "len(recv) = %d but counts[%d] = %d", len(recv), c.rank, counts[c.rank])
		case c.rank == root && len(send) != total:
			err = invalid(req.Kind, "on the root len(send) = %d but sum(counts) = %d", len(send), total)
		case c.rank == root:
			err = checkOwnBlock(req.Kind, recv, send, algo.Offsets(counts)[c.rank])
		}
	}
	return c.startCollective(ctx, req, err)
}

// ReduceScatter combines send (Size() blocks of len(recv) elements) across
// ranks with op and leaves block r of the result in rank r's recv.
func ReduceScatter[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	return startReduceScatter(ctx, c, send, recv, op).sync()
}

// StartReduceScatter is ReduceScatter, asynchronous.
func StartReduceScatter[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) *Work {
	return startReduceScatter[T](ctx, c, send, recv, op).async()
}

func startReduceScatter[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) *Work {
	if w := c.unusable(core.KindReduceScatter); w != nil {
		return w
	}
	req := c.request(core.KindReduceScatter, dtypeOf[T](), op, 0, asBytes(send), asBytes(recv))
	req.SigCount = len(recv)
	req.Counts = c.evenCounts(len(recv))
	var err error
	if len(send) != c.size*len(recv) {
		err = invalid(req.Kind, "len(send) = %d, want Size()*len(recv) = %d*%d", len(send), c.size, len(recv))
	} else {
		err = checkOverlap(req.Kind, send, recv, false)
	}
	if err == nil {
		err = c.reduceOp(req, op) // userop.go
	}
	return c.startCollective(ctx, req, err)
}

// ReduceScatterV is ReduceScatter with blocks of counts[r] elements:
// len(send) == sum(counts), len(recv) == counts[Rank()].
func ReduceScatterV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, op ReduceOp) error {
	return startReduceScatterV(ctx, c, send, recv, counts, op).sync()
}

// StartReduceScatterV is ReduceScatterV, asynchronous.
func StartReduceScatterV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, op ReduceOp) *Work {
	return startReduceScatterV[T](ctx, c, send, recv, counts, op).async()
}

func startReduceScatterV[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, op ReduceOp) *Work {
	if w := c.unusable(core.KindReduceScatterV); w != nil {
		return w
	}
	req := c.request(core.KindReduceScatterV, dtypeOf[T](), op, 0, asBytes(send), asBytes(recv))
	req.Counts = append([]int(nil), counts...)
	total, err := c.checkCounts(req.Kind, "counts", counts)
	req.SigCount = total
	if err == nil {
		switch {
		case len(send) != total:
			err = invalid(req.Kind, "len(send) = %d but sum(counts) = %d", len(send), total)
		case len(recv) != counts[c.rank]:
			err = invalid(req.Kind, "len(recv) = %d but counts[%d] = %d", len(recv), c.rank, counts[c.rank])
		default:
			err = checkOverlap(req.Kind, send, recv, false)
		}
	}
	if err == nil {
		err = c.reduceOp(req, op) // userop.go
	}
	return c.startCollective(ctx, req, err)
}

// AllToAll sends block p of send to rank p, which stores it as block
// Rank() of its recv. len(send) == len(recv), a multiple of Size().
func AllToAll[T Numeric](ctx context.Context, c *Comm, send, recv []T) error {
	return startAllToAll(ctx, c, send, recv).sync()
}

// StartAllToAll is AllToAll, asynchronous.
func StartAllToAll[T Numeric](ctx context.Context, c *Comm, send, recv []T) *Work {
	return startAllToAll[T](ctx, c, send, recv).async()
}

func startAllToAll[T Numeric](ctx context.Context, c *Comm, send, recv []T) *Work {
	if w := c.unusable(core.KindAllToAll); w != nil {
		return w
	}
	req := c.request(core.KindAllToAll, dtypeOf[T](), Sum, 0, asBytes(send), asBytes(recv))
	req.SigCount = len(send)
	var err error
	switch {
	case len(send) != len(recv):
		err = invalid(req.Kind, "len(send) = %d but len(recv) = %d: they must be equal", len(send), len(recv))
	case len(send)%c.size != 0:
		err = invalid(req.Kind, "len(send) = %d is not a multiple of Size() = %d (use AllToAllV for uneven splits)", len(send), c.size)
	default:
		err = checkOverlap(req.Kind, send, recv, false)
	}
	per := 0
	if c.size > 0 {
		per = len(send) / c.size
	}
	req.Counts = c.evenCounts(per)
	req.RecvCounts = req.Counts
	return c.startCollective(ctx, req, err)
}

// AllToAllV sends send[offset(sendCounts, p) : +sendCounts[p]] to rank p,
// which stores it at recv[offset(recvCounts, Rank()) : +recvCounts[Rank()]].
// sendCounts[p] on this rank must equal recvCounts[this rank] on rank p
// (like torch's all_to_all_single splits); a disagreement is ErrLength.
func AllToAllV[T Numeric](ctx context.Context, c *Comm, send, recv []T, sendCounts, recvCounts []int) error {
	return startAllToAllV(ctx, c, send, recv, sendCounts, recvCounts).sync()
}

// StartAllToAllV is AllToAllV, asynchronous.
func StartAllToAllV[T Numeric](ctx context.Context, c *Comm, send, recv []T, sendCounts, recvCounts []int) *Work {
	return startAllToAllV[T](ctx, c, send, recv, sendCounts, recvCounts).async()
}

func startAllToAllV[T Numeric](ctx context.Context, c *Comm, send, recv []T, sendCounts, recvCounts []int) *Work {
	if w := c.unusable(core.KindAllToAllV); w != nil {
		return w
	}
	req := c.request(core.KindAllToAllV, dtypeOf[T](), Sum, 0, asBytes(send), asBytes(recv))
	req.Counts = append([]int(nil), sendCounts...)
	req.RecvCounts = append([]int(nil), recvCounts...)
	stotal, err := c.checkCounts(req.Kind, "sendCounts", sendCounts)
	if err == nil {
		var rtotal int
		rtotal, err = c.checkCounts(req.Kind, "recvCounts", recvCounts)
		switch {
		case err != nil:
		case len(send) != stotal:
			err = invalid(req.Kind, "len(send) = %d but sum(sendCounts) = %d", len(send), stotal)
		case len(recv) != rtotal:
			err = invalid(req.Kind, "len(recv) = %d but sum(recvCounts) = %d", len(recv), rtotal)
		case sendCounts[c.rank] != recvCounts[c.rank]:
			err = invalid(req.Kind, "sendCounts[%d] = %d but recvCounts[%d] = %d: this rank's block to itself must have one size", c.rank, sendCounts[c.rank], c.rank, recvCounts[c.rank])
		default:
			err = checkOverlap(req.Kind, send, recv, false)
		}
	}
	return c.startCollective(ctx, req, err)
}

// Barrier returns once every rank of c has called it.
func Barrier(ctx context.Context, c *Comm) error { return startBarrier(ctx, c).sync() }

// StartBarrier is Barrier, asynchronous.
func StartBarrier(ctx context.Context, c *Comm) *Work {
	return startBarrier(ctx, c).async()
}

func startBarrier(ctx context.Context, c *Comm) *Work {
	req := c.request(core.KindBarrier, core.Byte, Sum, 0, nil, nil)
	return c.startCollective(ctx, req, nil)
}

// MonitoredBarrier is a barrier that rank 0 supervises: if some ranks do not
// arrive within timeout, every rank that did arrive (and every late rank,
// when it does) returns a *BarrierError naming them (ErrBarrierTimeout).
// With waitAll false rank 0 stops at the first late rank, as in torch.
// Unlike other failures this one does not abort the world.
func MonitoredBarrier(ctx context.Context, c *Comm, timeout time.Duration, waitAll bool) error {
	return startMonitoredBarrier(ctx, c, timeout, waitAll).sync()
}

// StartMonitoredBarrier is MonitoredBarrier, asynchronous.
func StartMonitoredBarrier(ctx context.Context, c *Comm, timeout time.Duration, waitAll bool) *Work {
	return startMonitoredBarrier(ctx, c, timeout, waitAll).async()
}

func startMonitoredBarrier(ctx context.Context, c *Comm, timeout time.Duration, waitAll bool) *Work {
	req := c.request(core.KindMonitoredBarrier, core.Byte, Sum, 0, nil, nil)
	req.Timeout, req.WaitAll = timeout, waitAll
	var err error
	if timeout <= 0 {
		err = invalid(req.Kind, "timeout %v, want > 0", timeout)
	}
	return c.startCollective(ctx, req, err)
}

// AllReduceCoalesced all-reduces every buffer of bufs in place with one
// collective (the buffers are packed into one message).
func AllReduceCoalesced[T Numeric](ctx context.Context, c *Comm, bufs [][]T, op ReduceOp) error {
	return startAllReduceCoalesced(ctx, c, bufs, op).sync()
}

// StartAllReduceCoalesced is AllReduceCoalesced, asynchronous: the buffers
// of bufs belong to the operation until it is done.
func StartAllReduceCoalesced[T Numeric](ctx context.Context, c *Comm, bufs [][]T, op ReduceOp) *Work {
	return startAllReduceCoalesced(ctx, c, bufs, op).async()
}

func startAllReduceCoalesced[T Numeric](ctx context.Context, c *Comm, bufs [][]T, op ReduceOp) *Work {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	flat := make([]T, 0, n)
	for _, b := range bufs {
		flat = append(flat, b...)
	}
	w := startAllReduce(ctx, c, flat, flat, op, algo.Auto)
	w.post = func() {
		rest := flat
		for _, b := range bufs {
			rest = rest[copy(b, rest):]
		}
	}
	return w
}

// AllGatherCoalesced all-gathers sends[i] into recvs[i] for every i with one
// collective: len(recvs[i]) == Size()*len(sends[i]).
func AllGatherCoalesced[T Numeric](ctx context.Context, c *Comm, sends, recvs [][]T) error {
	return startAllGatherCoalesced(ctx, c, sends, recvs).sync()
}

// StartAllGatherCoalesced is AllGatherCoalesced, asynchronous: sends and
// recvs belong to the operation until it is done. A bad argument fails it
// on every rank, as any collective's does.
func StartAllGatherCoalesced[T Numeric](ctx context.Context, c *Comm, sends, recvs [][]T) *Work {
	return startAllGatherCoalesced(ctx, c, sends, recvs).async()
}

func startAllGatherCoalesced[T Numeric](ctx context.Context, c *Comm, sends, recvs [][]T) *Work {
	if w := c.unusable(core.KindAllGather); w != nil {
		return w
	}
	per, err := checkGatherCoalesced(c.size, sends, recvs)
	if err != nil {
		// Still a collective: its sequence number is used and the world
		// aborted with the reason, so no other rank waits for this one.
		return c.startCollective(ctx, c.request(core.KindAllGather, dtypeOf[T](), Sum, 0, nil, nil), err)
	}
	flat := make([]T, 0, per)
	for _, s := range sends {
		flat = append(flat, s...)
	}
	all := make([]T, c.size*per)
	w := startAllGather(ctx, c, flat, all)
	w.post = func() {
		off := 0
		for i, s := range sends {
			for r := 0; r < c.size; r++ {
				copy(recvs[i][r*len(s):(r+1)*len(s)], all[r*per+off:r*per+off+len(s)])
			}
			off += len(s)
		}
	}
	return w
}

// checkGatherCoalesced checks AllGatherCoalesced's buffers and returns the
// number of elements each rank contributes.
func checkGatherCoalesced[T Numeric](size int, sends, recvs [][]T) (int, error) {
	if len(sends) != len(recvs) {
		return 0, invalid(core.KindAllGather, "AllGatherCoalesced: %d send buffers but %d receive buffers", len(sends), len(recvs))
	}
	per := 0
	for i, s := range sends {
		if len(recvs[i]) != size*len(s) {
			return 0, invalid(core.KindAllGather, "AllGatherCoalesced: len(recvs[%d]) = %d, want Size()*len(sends[%d]) = %d*%d", i, len(recvs[i]), i, size, len(s))
		}
		per += len(s)
	}
	return per, nil
}

// request builds the common part of a backend request.
func (c *Comm) request(kind core.Kind, dt core.DType, op ReduceOp, root int, send, recv []byte) *backend.Request {
	req := requests.Get().(*backend.Request)
	*req = backend.Request{Kind: kind, DType: dt, Op: op, Root: root, Peer: -1, Send: send, Recv: recv, Source: -1}
	return req
}

func (c *Comm) evenCounts(n int) []int {
	counts := make([]int, c.size)
	for i := range counts {
		counts[i] = n
	}
	return counts
}

func (c *Comm) checkRoot(kind core.Kind, root int) error {
	if root < 0 || root >= c.size {
		return invalid(kind, "root %d out of range [0,%d)", root, c.size)
	}
	return nil
}

func (c *Comm) checkCounts(kind core.Kind, name string, counts []int) (int, error) {
	if len(counts) != c.size {
		return 0, invalid(kind, "len(%s) = %d, want one count per rank (%d)", name, len(counts), c.size)
	}
	total := 0
	for i, n := range counts {
		if n < 0 {
			return 0, invalid(kind, "%s[%d] = %d is negative", name, i, n)
		}
		if n > maxInt-total {
			return 0, invalid(kind, "%s add up to more than an int holds (at %s[%d] = %d)", name, name, i, n)
		}
		total += n
	}
	return total, nil
}

func checkOp(kind core.Kind, op ReduceOp, dt DType) error {
	if !op.ValidFor(dt) {
		if op > Avg {
			return invalid(kind, "unknown reduce op %v", op)
		}
		return invalid(kind, "op %v is not defined for %v (bitwise ops need an integer type)", op, dt)
	}
	return nil
}

// checkOverlap refuses send and recv that share memory, except that
// identical slices are allowed when sameOK (in-place operations).
func checkOverlap[T Numeric](kind core.Kind, send, recv []T, sameOK bool) error {
	shared, same := overlap(send, recv)
	switch {
	case !shared, same && sameOK:
		return nil
	case same:
		return invalid(kind, "send and recv are the same slice; this operation needs separate buffers")
	}
	return invalid(kind, "send and recv overlap; pass separate buffers (or, where allowed, the very same slice for in place)")
}

// checkOwnBlock accepts a block that is either separate from the full buffer
// or exactly this rank's block of it at element offset off (in place).
func checkOwnBlock[T Numeric](kind core.Kind, block, full []T, off int) error {
	shared, _ := overlap(block, full)
	if !shared {
		return nil
	}
	if _, same := overlap(block, full[off:off+len(block)]); same {
		return nil
	}
	return invalid(kind, "the block overlaps the full buffer but is not this rank's block of it (elements %d..%d)", off, off+len(block))
}
