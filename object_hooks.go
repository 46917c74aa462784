package comm

import (
	"context"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/commhook"
)

// The internals package object (the object collectives, built on this
// package's public API) needs and no public call expresses; see
// internal/commhook for why each.
func init() {
	commhook.Set(&commhook.Hooks[*Comm]{
		Usable: (*Comm).usable,
		FailBroadcast: func(c *Comm, err error) error {
			return c.failCollective(core.KindBroadcast, err)
		},
		NextSeq: (*Comm).peekSeq,
		Private: func(ctx context.Context, c *Comm, seq uint64, disc int64) (*Comm, error) {
			ranks := make([]int, c.size)
			for i := range ranks {
				ranks[i] = i
			}
			return c.makeGroup(ctx, ranks, backend.GroupID(c.id, seq, disc))
		},
		Begin: func(ctx context.Context, c *Comm, op string, root int) (context.Context, func(int64, error)) {
			return c.beginObject(ctx, op, root)
		},
	})
}
