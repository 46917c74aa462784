package conformance

import (
	"context"
	"fmt"
	"slices"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// Grad is an element type defined on float32, as a training program
// defines its gradients; Count one defined on int32. The suite runs over
// them to check that every path (reductions, movement, point to point,
// objects) takes a type defined on an element type as that element type.
type (
	Grad  float32
	Count int32
)

// namedCases: reductions and movement over Grad, all-reduces over Count,
// point to point and object collectives of them.
func namedCases() []Case {
	var cs []Case
	cs = append(cs, reductionCases[Grad]()...)
	cs = append(cs, movementCases[Grad]()...)
	for _, op := range []comm.ReduceOp{comm.Sum, comm.BXor} {
		cs = append(cs, Case{fmt.Sprintf("AllReduce/Count/%v/n=7", op), func(ctx context.Context, c *comm.Comm) error {
			return checkAllReduce[Count](ctx, c, op, 7, false, comm.AllReduce[Count])
		}})
	}
	cs = append(cs, Case{"Named/StartBatchSendRecv/Grad", checkNamedSendRecv}, Case{"Named/Objects", checkNamedObjects})
	return cs
}

// checkNamedSendRecv sends every other rank a block of Grads.
func checkNamedSendRecv(ctx context.Context, c *comm.Comm) error {
	var ops []comm.P2POp[Grad]
	recvs := map[int][]Grad{}
	for p := 0; p < c.Size(); p++ {
		if p == c.Rank() {
			continue
		}
		recvs[p] = make([]Grad, 4)
		ops = append(ops, comm.P2POp[Grad]{Send: false, Buf: recvs[p], Peer: p, Tag: 11})
		ops = append(ops, comm.P2POp[Grad]{Send: true, Buf: blockData[Grad](c.Rank()*100+p, 0, 4), Peer: p, Tag: 11})
	}
	if err := comm.StartBatchSendRecv(ctx, c, ops).Wait(); err != nil {
		return err
	}
	for p, got := range recvs {
		if err := check(fmt.Sprintf("from %d", p), got, blockData[Grad](p*100+c.Rank(), 0, 4)); err != nil {
			return err
		}
	}
	return nil
}

// shard is an object with fields of named element types.
type shard struct {
	Step  Count
	Grads []Grad
}

func shardOf(r int) shard {
	return shard{Step: Count(r * 3), Grads: blockData[Grad](r, 0, r+1)}
}

func equalShard(a, b shard) bool {
	return a.Step == b.Step && slices.Equal(a.Grads, b.Grads)
}

// checkNamedObjects moves shards and bare Grads through the object
// collectives.
func checkNamedObjects(ctx context.Context, c *comm.Comm) error {
	root := c.Size() - 1
	var v shard
	if c.Rank() == root {
		v = shardOf(root)
	}
	if err := object.Broadcast(ctx, c, &v, root); err != nil {
		return err
	}
	if !equalShard(v, shardOf(root)) {
		return fmt.Errorf("BroadcastObject: got %+v, want %+v", v, shardOf(root))
	}
	all, err := object.AllGather(ctx, c, shardOf(c.Rank()))
	if err != nil {
		return err
	}
	for r, got := range all {
		if !equalShard(got, shardOf(r)) {
			return fmt.Errorf("AllGatherObject[%d]: got %+v, want %+v", r, got, shardOf(r))
		}
	}
	g, err := object.Gather(ctx, c, Grad(c.Rank())+0.5, 0)
	if err != nil {
		return err
	}
	for r, got := range g {
		if got != Grad(r)+0.5 {
			return fmt.Errorf("GatherObject[%d]: got %v, want %v", r, got, Grad(r)+0.5)
		}
	}
	var vs []Count
	if c.Rank() == 0 {
		for r := 0; r < c.Size(); r++ {
			vs = append(vs, Count(-r-1))
		}
	}
	mine, err := object.Scatter(ctx, c, vs, 0)
	if err != nil {
		return err
	}
	if mine != Count(-c.Rank()-1) {
		return fmt.Errorf("ScatterObject: got %v, want %v", mine, -c.Rank()-1)
	}
	return nil
}
