package native

import (
	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/bufpool"
	"github.com/gocomm/comm/internal/kernel"
)

// source names a buffer a plan's Work can be.
type source uint8

const (
	none       source = iota // no buffer (barrier)
	recvBuf                  // the caller's Recv
	sendBuf                  // the caller's Send (the scatter root's blocks)
	tempAsSend               // a pooled temporary as long as Send
	tempCounts               // a pooled temporary of sum(Counts) elements
)

// avgRanks says which ranks divide Recv by the size after an Avg.
type avgRanks uint8

const (
	avgNone avgRanks = iota
	avgAll
	avgRoot
)

// layout is how the engine lays out one kind's buffers for its plan: what
// Work (and Input) are before the plan runs and what is copied out after.
type layout struct {
	// work is Work on the root of a rooted kind and on every rank of the
	// others; nonRoot, if set, is Work on the other ranks of a rooted kind.
	work, nonRoot source
	// fromSend: Work starts as a copy of Send, taken lazily for large
	// inputs (lazyInPlace). Reductions.
	fromSend bool
	// input: the plan reads Send as algo.Input (all-to-all).
	input bool
	// placeOwn: this rank's Send goes into its block of Work before the
	// plan (gathers).
	placeOwn bool
	// ownBlockOut: the result is this rank's block of Work, copied to Recv
	// after the plan (scatters, reduce-scatters).
	ownBlockOut bool
	// bytes: elements are bytes whatever the DType (barrier).
	bytes bool
	avg   avgRanks
}

// layouts is the layout of every collective kind the engine runs.
var layouts = map[core.Kind]layout{
	core.KindAllReduce:      {work: recvBuf, fromSend: true, avg: avgAll},
	core.KindReduce:         {work: recvBuf, nonRoot: tempAsSend, fromSend: true, avg: avgRoot},
	core.KindBroadcast:      {work: recvBuf},
	core.KindAllGather:      {work: recvBuf, placeOwn: true},
	core.KindAllGatherV:     {work: recvBuf, placeOwn: true},
	core.KindGather:         {work: recvBuf, nonRoot: tempCounts, placeOwn: true},
	core.KindGatherV:        {work: recvBuf, nonRoot: tempCounts, placeOwn: true},
	core.KindScatter:        {work: sendBuf, nonRoot: tempCounts, ownBlockOut: true},
	core.KindScatterV:       {work: sendBuf, nonRoot: tempCounts, ownBlockOut: true},
	core.KindReduceScatter:  {work: tempAsSend, fromSend: true, ownBlockOut: true, avg: avgAll},
	core.KindReduceScatterV: {work: tempAsSend, fromSend: true, ownBlockOut: true, avg: avgAll},
	core.KindAllToAll:       {work: recvBuf, input: true},
	core.KindAllToAllV:      {work: recvBuf, input: true},
	core.KindBarrier:        {work: none, bytes: true},
}

// temps holds the pooled temporary of one collective (at most one).
type temps struct {
	pool *bufpool.Pool
	buf  []byte
}

// get returns a pooled buffer of n bytes that release gives back.
func (t *temps) get(n int) []byte {
	b := t.pool.Get(n)
	if b == nil {
		b = []byte{}
	}
	t.buf = b
	return b
}

// release gives the temporary back to the pool.
func (t *temps) release() {
	if t.buf != nil {
		t.pool.Put(t.buf)
		t.buf = nil
	}
}

// prepare lays out e's buffers for req on rank (of c) as l says,
// temporaries from t.
func (l layout) prepare(c *Comm, e *execution, req *backend.Request, t *temps) {
	if l.bytes {
		e.esize = 1
	}
	src := l.work
	if l.nonRoot != none && c.rank != req.Root {
		src = l.nonRoot
	}
	var work []byte
	switch src {
	case recvBuf:
		work = req.Recv
	case sendBuf:
		work = req.Send
	case tempAsSend:
		work = t.get(len(req.Send))
	case tempCounts:
		work = t.get(sum(req.Counts) * e.esize)
	}
	if l.fromSend {
		work = lazyInPlace(e, req.Send, work)
	}
	e.work = work
	if l.input {
		e.input = req.Send
	}
	if l.placeOwn {
		c.placeOwn(e, req.Counts, req.Send)
	}
}

// finish copies the result where the caller wants it after the plan ran,
// and divides an Avg.
func (l layout) finish(c *Comm, e *execution, req *backend.Request) error {
	if l.ownBlockOut {
		off := algo.Offsets(req.Counts)
		copy(req.Recv, e.work[off[c.rank]*e.esize:off[c.rank+1]*e.esize])
	}
	if req.Op == core.Avg && (l.avg == avgAll || (l.avg == avgRoot && c.rank == req.Root)) {
		return kernel.Divide(req.DType, req.Recv, c.size)
	}
	return nil
}

// placeOwn copies this rank's contribution into its block of the work buffer.
func (c *Comm) placeOwn(e *execution, counts []int, send []byte) {
	off := algo.Offsets(counts)[c.rank] * e.esize
	dst := e.work[off : off+len(send)]
	if !sameStart(dst, send) {
		copy(dst, send)
	}
}

// lazyMinBytes is the smallest input lazyInPlace does not copy at once:
// below it the copy costs less than keeping track of it.
const lazyMinBytes = 64 << 10

// lazyInPlace is inPlace for an input of at least lazyMinBytes that the
// execution copies only where and when its plan needs it (see lazyCopy).
func lazyInPlace(e *execution, send, recv []byte) []byte {
	if len(send) < lazyMinBytes || sameStart(send, recv) {
		return inPlace(send, recv)
	}
	e.lazyCopy(send)
	return recv
}

// inPlace returns recv after copying send into it (unless they are one
// buffer).
func inPlace(send, recv []byte) []byte {
	if !sameStart(send, recv) {
		copy(recv, send)
	}
	return recv
}

func sameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
