package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// Case is one check every rank of a communicator runs, in the same order on
// every rank. Run returns nil when this rank's results match the naive
// reference; it computes every rank's inputs itself, so the reference needs
// no communication.
type Case struct {
	Name string
	Run  func(ctx context.Context, c *comm.Comm) error
}

// Options selects the cases.
type Options struct {
	// Large adds cases of at least 1 MiB per rank.
	Large bool
}

// LargeCount is the element count of the large float32 cases: odd, and just
// over 1 MiB.
const LargeCount = 1<<18 + 3

// small counts every case runs with: empty, one element, and an odd count
// that divides unevenly among ranks.
var smallCounts = []int{0, 1, 7}

// Cases returns the suite.
func Cases(o Options) []Case {
	var cs []Case
	cs = append(cs, reductionCases[int8]()...)
	cs = append(cs, reductionCases[int16]()...)
	cs = append(cs, reductionCases[int32]()...)
	cs = append(cs, reductionCases[int64]()...)
	cs = append(cs, reductionCases[uint8]()...)
	cs = append(cs, reductionCases[uint16]()...)
	cs = append(cs, reductionCases[uint32]()...)
	cs = append(cs, reductionCases[uint64]()...)
	cs = append(cs, reductionCases[float32]()...)
	cs = append(cs, reductionCases[float64]()...)
	cs = append(cs, reductionCases[comm.Float16]()...)
	cs = append(cs, reductionCases[comm.BFloat16]()...)
	cs = append(cs, movementCases[int8]()...)
	cs = append(cs, movementCases[uint16]()...)
	cs = append(cs, movementCases[int32]()...)
	cs = append(cs, movementCases[uint64]()...)
	cs = append(cs, movementCases[float32]()...)
	cs = append(cs, movementCases[float64]()...)
	cs = append(cs, movementCases[comm.Float16]()...)
	cs = append(cs, movementCases[comm.BFloat16]()...)
	cs = append(cs, movementCases[int]()...)
	cs = append(cs, miscCases()...)
	cs = append(cs, namedCases()...)
	cs = append(cs, userOpCases()...)
	cs = append(cs, sharedCases()...)
	cs = append(cs, Case{"Hosts", checkHosts})
	if o.Large {
		cs = append(cs, largeCases()...)
	}
	return cs
}

func opsFor[T comm.Numeric]() []comm.ReduceOp {
	if infoOf[T]().float {
		return []comm.ReduceOp{comm.Sum, comm.Prod, comm.Min, comm.Max, comm.Avg}
	}
	return []comm.ReduceOp{comm.Sum, comm.Prod, comm.Min, comm.Max, comm.BAnd, comm.BOr, comm.BXor, comm.Avg}
}

// inputs returns rank r's reduction input of n elements.
func inputs[T comm.Numeric](op comm.ReduceOp, r, n int) []T {
	u := infoOf[T]().unsigned
	return fill[T](n, func(i int) int64 { return value(op, u, r, i) })
}

func blockData[T comm.Numeric](r, off, n int) []T {
	u := infoOf[T]().unsigned
	return fill[T](n, func(i int) int64 { return dataU(u, r, off+i) })
}

// reductionCases: AllReduce (in and out of place), Reduce, ReduceScatter(V)
// for every op valid for T.
func reductionCases[T comm.Numeric]() []Case {
	tn := infoOf[T]().name
	var cs []Case
	for _, op := range opsFor[T]() {
		for _, n := range smallCounts {
			for _, inPlace := range []bool{false, true} {
				cs = append(cs, Case{fmt.Sprintf("AllReduce/%s/%v/n=%d/inplace=%v", tn, op, n, inPlace), func(ctx context.Context, c *comm.Comm) error {
					return checkAllReduce[T](ctx, c, op, n, inPlace, comm.AllReduce[T])
				}})
			}
			cs = append(cs, Case{fmt.Sprintf("Reduce/%s/%v/n=%d", tn, op, n), func(ctx context.Context, c *comm.Comm) error {
				for root := 0; root < c.Size(); root++ {
					send := inputs[T](op, c.Rank(), n)
					var recv []T
					if c.Rank() == root {
						recv = make([]T, n)
					}
					if err := comm.Reduce(ctx, c, send, recv, op, root); err != nil {
						return err
					}
					if c.Rank() == root {
						if err := check(fmt.Sprintf("root %d", root), recv, reduceRefs[T](op, c.Size(), 0, n)); err != nil {
							return err
						}
					}
					if err := check("send untouched", send, inputs[T](op, c.Rank(), n)); err != nil {
						return err
					}
				}
				return nil
			}})
			cs = append(cs, Case{fmt.Sprintf("ReduceScatter/%s/%v/n=%d", tn, op, n), func(ctx context.Context, c *comm.Comm) error {
				send := inputs[T](op, c.Rank(), n*c.Size())
				recv := make([]T, n)
				if err := comm.ReduceScatter(ctx, c, send, recv, op); err != nil {
					return err
				}
				return check("block", recv, reduceRefs[T](op, c.Size(), c.Rank()*n, n))
			}})
			cs = append(cs, Case{fmt.Sprintf("ReduceScatterV/%s/%v/n=%d", tn, op, n), func(ctx context.Context, c *comm.Comm) error {
				counts := unevenCounts(c.Size(), n)
				off := offsets(counts)
				send := inputs[T](op, c.Rank(), off[c.Size()])
				recv := make([]T, counts[c.Rank()])
				if err := comm.ReduceScatterV(ctx, c, send, recv, counts, op); err != nil {
					return err
				}
				return check("block", recv, reduceRefs[T](op, c.Size(), off[c.Rank()], counts[c.Rank()]))
			}})
		}
	}
	return cs
}

func checkAllReduce[T comm.Numeric](ctx context.Context, c *comm.Comm, op comm.ReduceOp, n int, inPlace bool,
	f func(context.Context, *comm.Comm, []T, []T, comm.ReduceOp) error) error {
	send := inputs[T](op, c.Rank(), n)
	recv := send
	if !inPlace {
		recv = make([]T, n)
	}
	if err := f(ctx, c, send, recv, op); err != nil {
		return err
	}
	if !inPlace {
		if err := check("send untouched", send, inputs[T](op, c.Rank(), n)); err != nil {
			return err
		}
	}
	return check("result", recv, reduceRefs[T](op, c.Size(), 0, n))
}

func reduceRefs[T comm.Numeric](op comm.ReduceOp, size, off, n int) []T {
	if op != comm.Avg {
		u := infoOf[T]().unsigned
		return fill[T](n, func(i int) int64 { return reduceAcc(op, u, size, off+i) })
	}
	out := make([]T, n)
	for i := range out {
		out[i] = reduceRef[T](op, size, off+i)
	}
	return out
}

// unevenCounts gives rank r a block of (n + r) % 4 elements, with some
// zeros; deterministic so every rank agrees.
func unevenCounts(size, n int) []int {
	counts := make([]int, size)
	for r := range counts {
		counts[r] = (n + r*3) % 5
		if n == 0 {
			counts[r] = 0
		}
	}
	return counts
}

func offsets(counts []int) []int {
	off := make([]int, len(counts)+1)
	for i, n := range counts {
		off[i+1] = off[i] + n
	}
	return off
}

// movementCases: collectives that move data without reducing.
func movementCases[T comm.Numeric]() []Case {
	tn := infoOf[T]().name
	var cs []Case
	for _, n := range smallCounts {
		cs = append(cs,
			Case{fmt.Sprintf("Broadcast/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				return checkBroadcast[T](ctx, c, n)
			}},
			Case{fmt.Sprintf("AllGather/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				return checkAllGather[T](ctx, c, n)
			}},
			Case{fmt.Sprintf("AllGatherV/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				counts := unevenCounts(c.Size(), n)
				off := offsets(counts)
				send := blockData[T](c.Rank(), off[c.Rank()], counts[c.Rank()])
				recv := make([]T, off[c.Size()])
				if err := comm.AllGatherV(ctx, c, send, recv, counts); err != nil {
					return err
				}
				return check("gathered", recv, gathered[T](counts))
			}},
			Case{fmt.Sprintf("Gather/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				for root := 0; root < c.Size(); root++ {
					counts := slices.Repeat([]int{n}, c.Size())
					send := blockData[T](c.Rank(), c.Rank()*n, n)
					var recv []T
					if c.Rank() == root {
						recv = make([]T, n*c.Size())
					}
					if err := comm.Gather(ctx, c, send, recv, root); err != nil {
						return err
					}
					if c.Rank() == root {
						if err := check(fmt.Sprintf("root %d", root), recv, gathered[T](counts)); err != nil {
							return err
						}
					}
				}
				return nil
			}},
			Case{fmt.Sprintf("GatherV/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				counts := unevenCounts(c.Size(), n)
				off := offsets(counts)
				for root := 0; root < c.Size(); root++ {
					send := blockData[T](c.Rank(), off[c.Rank()], counts[c.Rank()])
					var recv []T
					if c.Rank() == root {
						recv = make([]T, off[c.Size()])
					}
					if err := comm.GatherV(ctx, c, send, recv, counts, root); err != nil {
						return err
					}
					if c.Rank() == root {
						if err := check(fmt.Sprintf("root %d", root), recv, gathered[T](counts)); err != nil {
							return err
						}
					}
				}
				return nil
			}},
			Case{fmt.Sprintf("Scatter/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				for root := 0; root < c.Size(); root++ {
					counts := slices.Repeat([]int{n}, c.Size())
					var send []T
					if c.Rank() == root {
						send = scattered[T](root, counts)
					}
					recv := make([]T, n)
					if err := comm.Scatter(ctx, c, send, recv, root); err != nil {
						return err
					}
					if err := check(fmt.Sprintf("root %d", root), recv, scattered[T](root, counts)[c.Rank()*n:(c.Rank()+1)*n]); err != nil {
						return err
					}
				}
				return nil
			}},
			Case{fmt.Sprintf("ScatterV/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				counts := unevenCounts(c.Size(), n)
				off := offsets(counts)
				for root := 0; root < c.Size(); root++ {
					var send []T
					if c.Rank() == root {
						send = scattered[T](root, counts)
					}
					recv := make([]T, counts[c.Rank()])
					if err := comm.ScatterV(ctx, c, send, recv, counts, root); err != nil {
						return err
					}
					if err := check(fmt.Sprintf("root %d", root), recv, scattered[T](root, counts)[off[c.Rank()]:off[c.Rank()+1]]); err != nil {
						return err
					}
				}
				return nil
			}},
			Case{fmt.Sprintf("AllToAll/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				return checkAllToAll[T](ctx, c, n)
			}},
			Case{fmt.Sprintf("AllToAllV/%s/n=%d", tn, n), func(ctx context.Context, c *comm.Comm) error {
				return checkAllToAllV[T](ctx, c, n)
			}},
		)
	}
	return cs
}

func checkBroadcast[T comm.Numeric](ctx context.Context, c *comm.Comm, n int) error {
	for root := 0; root < c.Size(); root++ {
		buf := make([]T, n)
		if c.Rank() == root {
			buf = blockData[T](root, 0, n)
		}
		if err := comm.Broadcast(ctx, c, buf, root); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("root %d", root), buf, blockData[T](root, 0, n)); err != nil {
			return err
		}
	}
	return nil
}

func checkAllGather[T comm.Numeric](ctx context.Context, c *comm.Comm, n int) error {
	counts := slices.Repeat([]int{n}, c.Size())
	send := blockData[T](c.Rank(), c.Rank()*n, n)
	recv := make([]T, n*c.Size())
	if err := comm.AllGather(ctx, c, send, recv); err != nil {
		return err
	}
	if err := check("out of place", recv, gathered[T](counts)); err != nil {
		return err
	}
	// In place: the input is this rank's block of the output.
	recv = make([]T, n*c.Size())
	copy(recv[c.Rank()*n:], send)
	if err := comm.AllGather(ctx, c, recv[c.Rank()*n:(c.Rank()+1)*n], recv); err != nil {
		return err
	}
	return check("in place", recv, gathered[T](counts))
}

func checkAllToAll[T comm.Numeric](ctx context.Context, c *comm.Comm, n int) error {
	size := c.Size()
	send := make([]T, n*size)
	for p := 0; p < size; p++ {
		copy(send[p*n:], blockData[T](c.Rank()*size+p, 0, n))
	}
	recv := make([]T, n*size)
	if err := comm.AllToAll(ctx, c, send, recv); err != nil {
		return err
	}
	want := make([]T, n*size)
	for q := 0; q < size; q++ {
		copy(want[q*n:], blockData[T](q*size+c.Rank(), 0, n))
	}
	return check("received", recv, want)
}

// a2aCount is how many elements rank from sends to rank to.
func a2aCount(n, from, to int) int {
	if n == 0 {
		return 0
	}
	return (n + from*2 + to) % 4
}

func checkAllToAllV[T comm.Numeric](ctx context.Context, c *comm.Comm, n int) error {
	size, me := c.Size(), c.Rank()
	sendCounts, recvCounts := make([]int, size), make([]int, size)
	for p := 0; p < size; p++ {
		sendCounts[p] = a2aCount(n, me, p)
		recvCounts[p] = a2aCount(n, p, me)
	}
	var send, want []T
	for p := 0; p < size; p++ {
		send = append(send, blockData[T](me*size+p, 0, sendCounts[p])...)
		want = append(want, blockData[T](p*size+me, 0, recvCounts[p])...)
	}
	recv := make([]T, len(want))
	if err := comm.AllToAllV(ctx, c, send, recv, sendCounts, recvCounts); err != nil {
		return err
	}
	return check("received", recv, want)
}

// gathered is the concatenation of every rank's block.
func gathered[T comm.Numeric](counts []int) []T {
	off := offsets(counts)
	var out []T
	for r, n := range counts {
		out = append(out, blockData[T](r, off[r], n)...)
	}
	return out
}

// scattered is what root scatters.
func scattered[T comm.Numeric](root int, counts []int) []T {
	return blockData[T](1000+root, 0, offsets(counts)[len(counts)])
}

// miscCases: point to point, barriers, coalesced and object collectives,
// async ordering.
func miscCases() []Case {
	return []Case{
		{"Barrier", func(ctx context.Context, c *comm.Comm) error {
			for i := 0; i < 3; i++ {
				if err := comm.Barrier(ctx, c); err != nil {
					return err
				}
			}
			return nil
		}},
		{"MonitoredBarrier", func(ctx context.Context, c *comm.Comm) error {
			return comm.MonitoredBarrier(ctx, c, 20*time.Second, true)
		}},
		{"SendRecv/ring", func(ctx context.Context, c *comm.Comm) error {
			if c.Size() == 1 {
				return nil
			}
			next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
			w := comm.StartSend(ctx, c, blockData[float64](c.Rank(), 0, 5), next, 7)
			got := make([]float64, 5)
			src, err := comm.Recv(ctx, c, got, prev, 7)
			if err != nil {
				return err
			}
			if err := w.Wait(); err != nil {
				return err
			}
			if src != prev {
				return fmt.Errorf("recv returned source %d, want %d", src, prev)
			}
			return check("payload", got, blockData[float64](prev, 0, 5))
		}},
		{"SendRecv/tags-order", func(ctx context.Context, c *comm.Comm) error {
			// Rank 1 sends tag 2 first, then two tag-1 messages; rank 0
			// receives tag 1 twice (in send order) and then tag 2.
			if c.Size() < 2 || c.Rank() > 1 {
				return nil
			}
			if c.Rank() == 1 {
				for _, m := range []struct{ tag, v int }{{2, 30}, {1, 10}, {1, 20}} {
					if err := comm.Send(ctx, c, []int32{int32(m.v)}, 0, m.tag); err != nil {
						return err
					}
				}
				return nil
			}
			for _, m := range []struct{ tag, v int }{{1, 10}, {1, 20}, {2, 30}} {
				got := []int32{0}
				if _, err := comm.Recv(ctx, c, got, 1, m.tag); err != nil {
					return err
				}
				if got[0] != int32(m.v) {
					return fmt.Errorf("tag %d: got %d, want %d", m.tag, got[0], m.v)
				}
			}
			return nil
		}},
		{"SendRecv/any-source", func(ctx context.Context, c *comm.Comm) error {
			if c.Rank() != 0 {
				return comm.Send(ctx, c, []int64{int64(c.Rank() * 100)}, 0, 3)
			}
			seen := map[int]bool{}
			for i := 1; i < c.Size(); i++ {
				got := []int64{0}
				src, err := comm.Recv(ctx, c, got, comm.AnySource, 3)
				if err != nil {
					return err
				}
				if got[0] != int64(src*100) || seen[src] {
					return fmt.Errorf("any-source: got %d from %d (seen before: %v)", got[0], src, seen[src])
				}
				seen[src] = true
			}
			return nil
		}},
		{"StartBatchSendRecv", func(ctx context.Context, c *comm.Comm) error {
			var ops []comm.P2POp[uint16]
			recvs := map[int][]uint16{}
			for p := 0; p < c.Size(); p++ {
				if p == c.Rank() {
					continue
				}
				recvs[p] = make([]uint16, 3)
				ops = append(ops, comm.P2POp[uint16]{Send: false, Buf: recvs[p], Peer: p, Tag: 9})
				ops = append(ops, comm.P2POp[uint16]{Send: true, Buf: blockData[uint16](c.Rank()*100+p, 0, 3), Peer: p, Tag: 9})
			}
			if err := comm.StartBatchSendRecv(ctx, c, ops).Wait(); err != nil {
				return err
			}
			for p, got := range recvs {
				if err := check(fmt.Sprintf("from %d", p), got, blockData[uint16](p*100+c.Rank(), 0, 3)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"AllReduceCoalesced", func(ctx context.Context, c *comm.Comm) error {
			a, b := inputs[float32](comm.Sum, c.Rank(), 5), inputs[float32](comm.Sum, c.Rank()+1, 3)
			if err := comm.AllReduceCoalesced(ctx, c, [][]float32{a, b}, comm.Sum); err != nil {
				return err
			}
			wantB := make([]float32, 3)
			for r := 1; r <= c.Size(); r++ {
				for i, v := range inputs[float32](comm.Sum, r, 3) {
					wantB[i] += v
				}
			}
			return errors.Join(check("a", a, reduceRefs[float32](comm.Sum, c.Size(), 0, 5)), check("b", b, wantB))
		}},
		{"AllGatherCoalesced", func(ctx context.Context, c *comm.Comm) error {
			s1, s2 := blockData[int32](c.Rank(), 0, 2), blockData[int32](c.Rank()+50, 0, 3)
			r1, r2 := make([]int32, 2*c.Size()), make([]int32, 3*c.Size())
			if err := comm.AllGatherCoalesced(ctx, c, [][]int32{s1, s2}, [][]int32{r1, r2}); err != nil {
				return err
			}
			var w1, w2 []int32
			for r := 0; r < c.Size(); r++ {
				w1 = append(w1, blockData[int32](r, 0, 2)...)
				w2 = append(w2, blockData[int32](r+50, 0, 3)...)
			}
			return errors.Join(check("first", r1, w1), check("second", r2, w2))
		}},
		{"InferenceAllReduce", func(ctx context.Context, c *comm.Comm) error {
			return checkAllReduce[float32](ctx, c, comm.Sum, 9, true, comm.InferenceAllReduce[float32])
		}},
		{"Async/many-in-flight", func(ctx context.Context, c *comm.Comm) error {
			const k = 6
			bufs := make([][]int64, k)
			works := make([]*comm.Work, k)
			for j := range bufs {
				bufs[j] = inputs[int64](comm.Sum, c.Rank()+j, 4)
				works[j] = comm.StartAllReduce(ctx, c, bufs[j], bufs[j], comm.Sum)
			}
			for j := k - 1; j >= 0; j-- {
				if err := works[j].Wait(); err != nil {
					return err
				}
			}
			for j := range bufs {
				want := make([]int64, 4)
				for r := 0; r < c.Size(); r++ {
					for i, v := range inputs[int64](comm.Sum, r+j, 4) {
						want[i] += v
					}
				}
				if err := check(fmt.Sprintf("op %d", j), bufs[j], want); err != nil {
					return err
				}
			}
			return nil
		}},
		{"Objects", checkObjects},
	}
}

type record struct {
	Name  string
	Rank  int
	Tags  []string
	Score float64
}

func recordOf(r int) record {
	return record{Name: fmt.Sprintf("rank-%d", r), Rank: r, Tags: slices.Repeat([]string{"x"}, r), Score: float64(r) / 4}
}

func checkObjects(ctx context.Context, c *comm.Comm) error {
	root := c.Size() - 1
	v := record{}
	if c.Rank() == root {
		v = recordOf(root)
	}
	if err := object.Broadcast(ctx, c, &v, root); err != nil {
		return err
	}
	if !equalRecord(v, recordOf(root)) {
		return fmt.Errorf("object.Broadcast: got %+v", v)
	}
	all, err := object.AllGather(ctx, c, recordOf(c.Rank()))
	if err != nil {
		return err
	}
	for r, got := range all {
		if !equalRecord(got, recordOf(r)) {
			return fmt.Errorf("object.AllGather[%d]: got %+v", r, got)
		}
	}
	g, err := object.Gather(ctx, c, recordOf(c.Rank()), 0)
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		for r, got := range g {
			if !equalRecord(got, recordOf(r)) {
				return fmt.Errorf("object.Gather[%d]: got %+v", r, got)
			}
		}
	} else if g != nil {
		return fmt.Errorf("object.Gather on a non-root returned %d values", len(g))
	}
	var vs []record
	if c.Rank() == 0 {
		for r := 0; r < c.Size(); r++ {
			vs = append(vs, recordOf(r+10))
		}
	}
	mine, err := object.Scatter(ctx, c, vs, 0)
	if err != nil {
		return err
	}
	if !equalRecord(mine, recordOf(c.Rank()+10)) {
		return fmt.Errorf("object.Scatter: got %+v", mine)
	}
	return nil
}

func equalRecord(a, b record) bool {
	return a.Name == b.Name && a.Rank == b.Rank && a.Score == b.Score && len(a.Tags) == len(b.Tags)
}

// largeCases move at least 1 MiB per rank.
func largeCases() []Case {
	n := LargeCount
	return []Case{
		{"Large/AllReduce/float32/Sum", func(ctx context.Context, c *comm.Comm) error {
			return checkAllReduce[float32](ctx, c, comm.Sum, n, true, comm.AllReduce[float32])
		}},
		{"Large/AllReduce/int32/Max/out-of-place", func(ctx context.Context, c *comm.Comm) error {
			return checkAllReduce[int32](ctx, c, comm.Max, n, false, comm.AllReduce[int32])
		}},
		{"Large/Broadcast/float32", func(ctx context.Context, c *comm.Comm) error { return checkBroadcast[float32](ctx, c, n) }},
		{"Large/AllGather/float32", func(ctx context.Context, c *comm.Comm) error { return checkAllGather[float32](ctx, c, n) }},
		{"Large/ReduceScatter/float32", func(ctx context.Context, c *comm.Comm) error {
			send := inputs[float32](comm.Sum, c.Rank(), n*c.Size())
			recv := make([]float32, n)
			if err := comm.ReduceScatter(ctx, c, send, recv, comm.Sum); err != nil {
				return err
			}
			return check("block", recv, reduceRefs[float32](comm.Sum, c.Size(), c.Rank()*n, n))
		}},
		{"Large/AllToAll/float32", func(ctx context.Context, c *comm.Comm) error {
			return checkAllToAll[float32](ctx, c, n/c.Size()+1)
		}},
	}
}

// QuickCases is a smaller suite for sweeps over algorithms: every
// collective, fewer element types.
func QuickCases() []Case {
	var cs []Case
	cs = append(cs, reductionCases[int32]()...)
	cs = append(cs, reductionCases[float32]()...)
	cs = append(cs, reductionCases[comm.Float16]()...)
	cs = append(cs, movementCases[int8]()...)
	cs = append(cs, movementCases[float64]()...)
	cs = append(cs, miscCases()...)
	cs = append(cs, userOpSpecCases(affineOp, quickUserOpCounts)...)
	return cs
}
