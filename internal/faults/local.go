package faults

import (
	"context"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// objValue is the value of the object cases: an ordinary map on every rank
// but the bad one, whose map holds a function, which encoding/gob refuses.
type objValue = map[string]any

func objectOf(c *comm.Comm, bad int) objValue {
	if c.Rank() == bad {
		return objValue{"step": func() {}}
	}
	return objValue{"rank": c.Rank()}
}

// localCases are the "local/<case>" scenarios: in each, rank bad fails
// on its own (an argument or a value only it has wrong) and every rank
// must fail naming it.
var localCases = map[string]func(ctx context.Context, c *comm.Comm, bad int) error{
	"broadcast-object": func(ctx context.Context, c *comm.Comm, bad int) error {
		v := objectOf(c, bad)
		return object.Broadcast(ctx, c, &v, bad)
	},
	"allgather-object": func(ctx context.Context, c *comm.Comm, bad int) error {
		_, err := object.AllGather(ctx, c, objectOf(c, bad))
		return err
	},
	"gather-object": func(ctx context.Context, c *comm.Comm, bad int) error {
		_, err := object.Gather(ctx, c, objectOf(c, bad), 0)
		return err
	},
	"scatter-object": func(ctx context.Context, c *comm.Comm, bad int) error {
		vs := make([]objValue, c.Size())
		for r := range vs {
			vs[r] = objValue{"to": r}
		}
		vs[c.Size()-1] = objValue{"step": func() {}}
		_, err := object.Scatter(ctx, c, vs, bad)
		return err
	},
	"allreduce-object": func(ctx context.Context, c *comm.Comm, bad int) error {
		_, err := object.AllReduce(ctx, c, objectOf(c, bad), func(a, b objValue) objValue { return a })
		return err
	},
	"allgather-coalesced": func(ctx context.Context, c *comm.Comm, bad int) error {
		sends := [][]float32{{1, 2}, {3}}
		recvs := [][]float32{make([]float32, 2*c.Size()), make([]float32, c.Size())}
		if c.Rank() == bad {
			recvs = recvs[:1] // one receive buffer short
		}
		return comm.AllGatherCoalesced(ctx, c, sends, recvs)
	},
	"allreduce-coalesced-op": func(ctx context.Context, c *comm.Comm, bad int) error {
		op := comm.Sum
		if c.Rank() == bad {
			op = comm.BAnd // not defined for float32
		}
		return comm.AllReduceCoalesced(ctx, c, [][]float32{{1, 2}, {3}}, op)
	},
	"broadcast-root": func(ctx context.Context, c *comm.Comm, bad int) error {
		root := 0
		if c.Rank() == bad {
			root = c.Size() // out of range
		}
		return comm.Broadcast(ctx, c, []float32{1, 2, 3}, root)
	},
	"allgather-length": func(ctx context.Context, c *comm.Comm, bad int) error {
		recv := make([]float32, 4*c.Size())
		if c.Rank() == bad {
			recv = recv[:len(recv)-1]
		}
		return comm.AllGather(ctx, c, make([]float32, 4), recv)
	},
}

// LocalCases lists the "local/<case>" scenarios' case names.
func LocalCases() []string {
	return []string{"broadcast-object", "allgather-object", "gather-object", "scatter-object", "allreduce-object",
		"allgather-coalesced", "allreduce-coalesced-op", "broadcast-root", "allgather-length"}
}
