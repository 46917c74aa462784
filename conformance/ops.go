package conformance

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/gocomm/comm"
)

// opKind names the collectives an opSpec can describe.
type opKind int

const (
	opAllReduce opKind = iota
	opReduce
	opBroadcast
	opAllGather
	opAllGatherV
	opGather
	opGatherV
	opScatter
	opScatterV
	opReduceScatter
	opReduceScatterV
	opAllToAll
	opAllToAllV
	opBarrier
	numOpKinds
)

var opKindNames = [...]string{
	opAllReduce: "AllReduce", opReduce: "Reduce", opBroadcast: "Broadcast",
	opAllGather: "AllGather", opAllGatherV: "AllGatherV", opGather: "Gather", opGatherV: "GatherV",
	opScatter: "Scatter", opScatterV: "ScatterV", opReduceScatter: "ReduceScatter",
	opReduceScatterV: "ReduceScatterV", opAllToAll: "AllToAll", opAllToAllV: "AllToAllV", opBarrier: "Barrier",
}

func (k opKind) String() string { return opKindNames[k] }

// rooted reports whether only the root's buffer is significant on one side.
func (k opKind) rooted() bool {
	switch k {
	case opReduce, opGather, opGatherV, opScatter, opScatterV:
		return true
	}
	return false
}

// opSpec is one collective call whose arguments every rank derives alike.
// n is the count the call is named by: the buffer length of AllReduce,
// Reduce and Broadcast, each rank's block of the even forms, and the total
// of the V forms (split unevenly by vCounts).
type opSpec struct {
	kind opKind
	n    int
	op   comm.ReduceOp
	root int
	// full: ranks other than the root pass a full-size buffer where the
	// API lets them pass nil (recv of Reduce and Gather, send of Scatter).
	full bool
	// salt varies the data between calls, so that a message delivered to
	// the wrong call shows.
	salt int
}

func (s opSpec) String() string {
	desc := fmt.Sprintf("%v/n=%d", s.kind, s.n)
	switch s.kind {
	case opAllReduce, opReduceScatter, opReduceScatterV:
		desc += "/" + s.op.String()
	case opReduce:
		desc += fmt.Sprintf("/%v/root=%d", s.op, s.root)
	case opBroadcast:
		desc += fmt.Sprintf("/root=%d", s.root)
	}
	if s.kind.rooted() && s.kind != opReduce {
		desc += fmt.Sprintf("/root=%d", s.root)
	}
	if s.kind.rooted() {
		if s.full {
			desc += "/non-root=full"
		} else {
			desc += "/non-root=nil"
		}
	}
	return desc
}

// vCounts splits total unevenly but deterministically among size ranks
// (some blocks empty when total is small).
func vCounts(size, total int) []int {
	counts := make([]int, size)
	weight := 0
	for r := range counts {
		weight += r%3 + 1
	}
	left := total
	for r := range counts {
		counts[r] = total * (r%3 + 1) / weight
		left -= counts[r]
	}
	counts[size-1] += left
	return counts
}

// saltedBlock is block data of rank r at offset off, varied by salt.
func saltedBlock[T comm.Numeric](salt, r, off, n int) []T {
	return blockData[T](r+64*salt, off, n)
}

func saltedGathered[T comm.Numeric](salt int, counts []int) []T {
	off := offsets(counts)
	out := make([]T, 0, off[len(counts)])
	for r, n := range counts {
		out = append(out, saltedBlock[T](salt, r, off[r], n)...)
	}
	return out
}

// refs memoizes reference results: the ranks of an in-process world (and
// the roots of one case) would otherwise each compute the same MiBs of
// expected values. Only expected values are shared, never a buffer handed
// to the library, so a corrupted buffer cannot pass for its reference.
var refs struct {
	mu    sync.Mutex
	keys  []string
	items map[string]any
}

// memo returns the value for key, computing it with gen once; it keeps the
// 16 most recent.
func memo[T any](key string, gen func() T) T {
	refs.mu.Lock()
	if v, ok := refs.items[key]; ok {
		refs.mu.Unlock()
		return v.(T)
	}
	refs.mu.Unlock()
	v := gen()
	refs.mu.Lock()
	defer refs.mu.Unlock()
	if refs.items == nil {
		refs.items = map[string]any{}
	}
	if _, ok := refs.items[key]; !ok {
		refs.items[key] = v
		refs.keys = append(refs.keys, key)
		if len(refs.keys) > 16 {
			delete(refs.items, refs.keys[0])
			refs.keys = refs.keys[1:]
		}
	}
	return v
}

// refKey names a reference by what it depends on.
func refKey[T comm.Numeric](what string, args ...any) string {
	return fmt.Sprintf("%s/%s/%v", infoOf[T]().name, what, args)
}

// startOp starts s on c and returns its Work and the check to run once the
// Work is done. It is used by blocking (start, wait, check) and by
// asynchronous programs (several started, waited in any order).
func startOp[T comm.Numeric](ctx context.Context, c *comm.Comm, s opSpec) (*comm.Work, func() error) {
	size, me := c.Size(), c.Rank()
	isRoot := me == s.root
	// nonRoot returns a buffer of n elements for the side only the root
	// needs: nil, or a full one when s.full.
	nonRoot := func(n int) []T {
		if s.full {
			return make([]T, n)
		}
		return nil
	}
	switch s.kind {
	case opAllReduce:
		send := inputs[T](s.op, me, s.n)
		recv := make([]T, s.n)
		return comm.StartAllReduce(ctx, c, send, recv, s.op), func() error {
			return check("result", recv, memo(refKey[T]("reduce", s.op, size, 0, s.n), func() []T { return reduceRefs[T](s.op, size, 0, s.n) }))
		}
	case opReduce:
		send := inputs[T](s.op, me, s.n)
		recv := nonRoot(s.n)
		if isRoot {
			recv = make([]T, s.n)
		}
		return comm.StartReduce(ctx, c, send, recv, s.op, s.root), func() error {
			if !isRoot {
				return check("send untouched", send, inputs[T](s.op, me, s.n))
			}
			return check("result", recv, memo(refKey[T]("reduce", s.op, size, 0, s.n), func() []T { return reduceRefs[T](s.op, size, 0, s.n) }))
		}
	case opBroadcast:
		want := memo(refKey[T]("block", s.salt, s.root, s.n), func() []T { return saltedBlock[T](s.salt, s.root, 0, s.n) })
		buf := make([]T, s.n)
		if isRoot {
			copy(buf, want)
		}
		return comm.StartBroadcast(ctx, c, buf, s.root), func() error {
			return check("result", buf, want)
		}
	case opAllGather, opAllGatherV, opGather, opGatherV:
		counts := slices.Repeat([]int{s.n}, size)
		if s.kind == opAllGatherV || s.kind == opGatherV {
			counts = vCounts(size, s.n)
		}
		off := offsets(counts)
		want := memo(refKey[T]("gathered", s.salt, counts), func() []T { return saltedGathered[T](s.salt, counts) })
		send := slices.Clone(want[off[me]:off[me+1]])
		var recv []T
		var w *comm.Work
		switch s.kind {
		case opAllGather:
			recv = make([]T, off[size])
			w = comm.StartAllGather(ctx, c, send, recv)
		case opAllGatherV:
			recv = make([]T, off[size])
			w = comm.StartAllGatherV(ctx, c, send, recv, counts)
		case opGather:
			recv = nonRoot(off[size])
			if isRoot {
				recv = make([]T, off[size])
			}
			w = comm.StartGather(ctx, c, send, recv, s.root)
		default:
			recv = nonRoot(off[size])
			if isRoot {
				recv = make([]T, off[size])
			}
			w = comm.StartGatherV(ctx, c, send, recv, counts, s.root)
		}
		rooted := s.kind.rooted()
		return w, func() error {
			if rooted && !isRoot {
				return nil
			}
			return check("result", recv, want)
		}
	case opScatter, opScatterV:
		counts := slices.Repeat([]int{s.n}, size)
		if s.kind == opScatterV {
			counts = vCounts(size, s.n)
		}
		off := offsets(counts)
		// What the root scatters; the same for every root of a case, so
		// that the ranks share one reference.
		all := memo(refKey[T]("scattered", s.salt, off[size]), func() []T { return saltedBlock[T](s.salt, 1000, 0, off[size]) })
		send := nonRoot(off[size])
		if isRoot {
			send = slices.Clone(all)
		}
		recv := make([]T, counts[me])
		var w *comm.Work
		if s.kind == opScatter {
			w = comm.StartScatter(ctx, c, send, recv, s.root)
		} else {
			w = comm.StartScatterV(ctx, c, send, recv, counts, s.root)
		}
		return w, func() error { return check("result", recv, all[off[me]:off[me+1]]) }
	case opReduceScatter, opReduceScatterV:
		counts := slices.Repeat([]int{s.n}, size)
		if s.kind == opReduceScatterV {
			counts = vCounts(size, s.n)
		}
		off := offsets(counts)
		send := inputs[T](s.op, me, off[size])
		recv := make([]T, counts[me])
		var w *comm.Work
		if s.kind == opReduceScatter {
			w = comm.StartReduceScatter(ctx, c, send, recv, s.op)
		} else {
			w = comm.StartReduceScatterV(ctx, c, send, recv, counts, s.op)
		}
		return w, func() error {
			want := memo(refKey[T]("reduce", s.op, size, 0, off[size]), func() []T { return reduceRefs[T](s.op, size, 0, off[size]) })
			return check("block", recv, want[off[me]:off[me+1]])
		}
	case opAllToAll, opAllToAllV:
		// Rank p sends count(p, q) elements to rank q: s.n each in the even
		// form, an uneven split of s.n in the V form.
		count := func(from, to int) int {
			if s.kind == opAllToAll {
				return s.n
			}
			return vCounts(size, s.n)[(from+to)%size]
		}
		sendCounts, recvCounts := make([]int, size), make([]int, size)
		var send, want []T
		for p := 0; p < size; p++ {
			sendCounts[p], recvCounts[p] = count(me, p), count(p, me)
			send = append(send, saltedBlock[T](s.salt, me*size+p, 0, sendCounts[p])...)
			want = append(want, saltedBlock[T](s.salt, p*size+me, 0, recvCounts[p])...)
		}
		recv := make([]T, len(want))
		var w *comm.Work
		if s.kind == opAllToAll {
			w = comm.StartAllToAll(ctx, c, send, recv)
		} else {
			w = comm.StartAllToAllV(ctx, c, send, recv, sendCounts, recvCounts)
		}
		return w, func() error { return check("received", recv, want) }
	case opBarrier:
		return comm.StartBarrier(ctx, c), func() error { return nil }
	}
	panic(fmt.Sprintf("conformance: unknown op kind %d", s.kind))
}

// runOp runs s on c, blocking, and checks its result.
func runOp[T comm.Numeric](ctx context.Context, c *comm.Comm, s opSpec) error {
	w, verify := startOp[T](ctx, c, s)
	if err := w.Wait(); err != nil {
		return fmt.Errorf("%v: %w", s, err)
	}
	if err := verify(); err != nil {
		return fmt.Errorf("%v: %w", s, err)
	}
	return nil
}
