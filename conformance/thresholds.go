package conformance

import (
	"context"
	"fmt"
	"slices"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// Thresholds are the message sizes, in bytes, at which the native backend
// changes what it does: the cost model's schedule choices, copying the input
// at once or lazily, sending inline, pipelining broadcasts, the ring for
// all-reduce on a host with more ranks than CPUs (1 KiB), the shared-memory
// board's limits per kind (1, 2, 8 and 16 KiB), the broadcast's on the
// board's stage (128 KiB with more ranks than CPUs, 1 MiB), halving-doubling
// for all-reduce over TCP with more ranks than CPUs (from 512 KiB; see
// AllReduceThresholds for where it ends). backend/native's tests check
// that its cost model uses no size missing here, so a new threshold gets
// cases of its own.
var Thresholds = []int{1 << 10, 2 << 10, 8 << 10, 16 << 10, 64 << 10, 128 << 10, 512 << 10, 1 << 20}

// AllReduceThresholds are sizes, in bytes, at which only the native
// backend's all-reduce changes what it does (halving-doubling gives way
// to the ring over TCP with more ranks than CPUs, 4 MiB): ThresholdCases
// runs only all-reduces around them, since every other kind at these
// sizes would add minutes under -race and test nothing new.
var AllReduceThresholds = []int{4 << 20}

// ThresholdCases returns every collective at the counts whose message size,
// as a cost model measures it (the whole buffer of all-reduce, reduce and
// broadcast; the total over all ranks of the others), falls one element
// below, at, and one element above each of Thresholds (only all-reduces
// around AllReduceThresholds), on a communicator of size ranks. The
// rooted collectives run for every root, once with the buffers only the
// root needs left nil on the other ranks and once with full ones there:
// the ranks must agree on a schedule either way.
func ThresholdCases(size int) []Case {
	const es = 4 // int32
	var cs []Case
	add := func(kind opKind, n int) {
		cs = append(cs, Case{fmt.Sprintf("Threshold/%v/int32/n=%d", kind, n), func(ctx context.Context, c *comm.Comm) error {
			s := opSpec{kind: kind, n: n, op: comm.Sum}
			if !kind.rooted() && kind != opBroadcast {
				return runOp[int32](ctx, c, s)
			}
			for root := 0; root < c.Size(); root++ {
				for _, full := range []bool{false, true} {
					if kind == opBroadcast && full {
						continue // every rank's buffer is significant
					}
					s.root, s.full = root, full
					if err := runOp[int32](ctx, c, s); err != nil {
						return err
					}
				}
			}
			return nil
		}})
	}
	for _, b := range Thresholds {
		t := b / es
		around := []int{t - 1, t, t + 1}
		for _, kind := range []opKind{opAllReduce, opReduce, opBroadcast, opAllGatherV, opGatherV, opScatterV, opReduceScatterV, opAllToAllV} {
			for _, n := range around {
				add(kind, n)
			}
		}
		// The even forms: per-rank counts whose totals bracket t.
		var per []int
		for _, total := range around {
			per = append(per, total/size, (total+size-1)/size)
		}
		slices.Sort(per)
		per = slices.Compact(per)
		for _, kind := range []opKind{opAllGather, opGather, opScatter, opReduceScatter, opAllToAll} {
			for _, n := range per {
				add(kind, n)
			}
		}
	}
	for _, b := range AllReduceThresholds {
		t := b / es
		for _, n := range []int{t - 1, t, t + 1} {
			add(opAllReduce, n)
		}
	}
	// The object forms, whose byte counts only the ranks' encodings agree
	// on: values just large enough that the total crosses the largest
	// threshold.
	per := Thresholds[len(Thresholds)-1]/size + 64
	cs = append(cs, Case{fmt.Sprintf("Threshold/object.Gather,object.Scatter/bytes=%d", per), func(ctx context.Context, c *comm.Comm) error {
		return checkLargeObjects(ctx, c, per)
	}})
	return cs
}

func checkLargeObjects(ctx context.Context, c *comm.Comm, per int) error {
	// []byte: gob writes it as is, so the encoding is as long as the value.
	block := func(r int) []byte {
		b := make([]byte, per)
		for i := range b {
			b[i] = byte(r*13 + i*7)
		}
		return b
	}
	for root := 0; root < c.Size(); root++ {
		got, err := object.Gather(ctx, c, block(c.Rank()), root)
		if err != nil {
			return fmt.Errorf("object.Gather root %d: %w", root, err)
		}
		if c.Rank() == root {
			for r, v := range got {
				if err := check(fmt.Sprintf("object.Gather root %d, rank %d's value", root, r), v, block(r)); err != nil {
					return err
				}
			}
		}
		var vs [][]byte // nil on the other ranks
		if c.Rank() == root {
			for r := range c.Size() {
				vs = append(vs, block(r+100))
			}
		}
		mine, err := object.Scatter(ctx, c, vs, root)
		if err != nil {
			return fmt.Errorf("object.Scatter root %d: %w", root, err)
		}
		if err := check(fmt.Sprintf("object.Scatter root %d", root), mine, block(c.Rank()+100)); err != nil {
			return err
		}
	}
	return nil
}
