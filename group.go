package comm

import (
	"context"
	"fmt"
	"sort"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// NewGroup creates the communicator of the given ranks of c, in that order
// (rank i of the group is c's rank ranks[i]). Every rank of c must call it,
// members or not, with the same ranks; a rank outside ranks gets a
// communicator whose Rank is -1 and whose collectives fail with ErrNotMember.
// The group inherits c's timeout.
func (c *Comm) NewGroup(ctx context.Context, ranks []int) (*Comm, error) {
	if err := c.usable("NewGroup"); err != nil {
		return nil, err
	}
	seen := make(map[int]bool, len(ranks))
	var verr error
	for _, r := range ranks {
		switch {
		case r < 0 || r >= c.size:
			verr = invalid(core.KindNewGroup, "rank %d out of range [0,%d)", r, c.size)
		case seen[r]:
			verr = invalid(core.KindNewGroup, "rank %d listed twice", r)
		}
		seen[r] = true
	}
	if len(ranks) == 0 && verr == nil {
		verr = invalid(core.KindNewGroup, "no ranks given")
	}
	if verr != nil {
		// Consume the collective's sequence number and abort, as every
		// invalid collective does.
		return nil, c.startCollective(ctx, c.request(core.KindNewGroup, core.Byte, Sum, 0, nil, nil), verr).Wait()
	}
	// Every rank contributes a fingerprint of its list, so that ranks that
	// disagree find out now instead of hanging in the group's first
	// collective.
	fp := fingerprint(ranks)
	all := make([]uint64, c.size)
	seq := c.peekSeq()
	if err := AllGather(ctx, c, []uint64{fp}, all); err != nil {
		return nil, err
	}
	for r, f := range all {
		if f != fp {
			return nil, fmt.Errorf("%w: NewGroup: rank %d passed a different rank list than this rank (%v)", ErrMismatch, r, ranks)
		}
	}
	return c.makeGroup(ctx, ranks, backend.GroupID(c.id, seq, -1))
}

// Split partitions c like MPI_Comm_split: ranks that pass the same color form
// one group, ordered by key and then by their rank in c. Every rank of c must
// call it. A negative color leaves the caller out (its communicator has Rank
// -1, as with MPI_UNDEFINED).
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if err := c.usable("Split"); err != nil {
		return nil, err
	}
	seq := c.peekSeq()
	all := make([]int64, 2*c.size)
	if err := AllGather(ctx, c, []int64{int64(color), int64(key)}, all); err != nil {
		return nil, err
	}
	if color < 0 {
		return c.nonMember(nil), nil
	}
	type member struct{ key, rank int }
	var ms []member
	for r := 0; r < c.size; r++ {
		if int(all[2*r]) == color {
			ms = append(ms, member{int(all[2*r+1]), r})
		}
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].key != ms[j].key {
			return ms[i].key < ms[j].key
		}
		return ms[i].rank < ms[j].rank
	})
	ranks := make([]int, len(ms))
	for i, m := range ms {
		ranks[i] = m.rank
	}
	return c.makeGroup(ctx, ranks, backend.GroupID(c.id, seq, int64(color)))
}

// peekSeq is the sequence number the next collective will get.
func (c *Comm) peekSeq() uint64 {
	return c.seq.Load() + 1
}

func (c *Comm) makeGroup(ctx context.Context, ranks []int, id uint64) (*Comm, error) {
	mine := -1
	for i, r := range ranks {
		if r == c.rank {
			mine = i
		}
	}
	if mine < 0 {
		return c.nonMember(ranks), nil
	}
	be, err := c.be.Group(ctx, ranks, id)
	if err != nil {
		return nil, err
	}
	g := &Comm{be: be, id: id, timeout: c.timeout, log: c.log, rank: mine, size: len(ranks), world: c.root(), prof: c.prof}
	g.inline, _ = be.(backend.Inliner)
	g.global = make([]int, len(ranks))
	for i, r := range ranks {
		g.global[i] = c.global[r]
	}
	g.attachGroupFlight()
	return g, nil
}

func (c *Comm) nonMember(ranks []int) *Comm {
	g := &Comm{timeout: c.timeout, log: c.log, rank: -1, size: len(ranks), world: c.root()}
	g.global = make([]int, len(ranks))
	for i, r := range ranks {
		g.global[i] = c.global[r]
	}
	return g
}

func fingerprint(ranks []int) uint64 {
	h := uint64(14695981039346656037)
	for _, r := range ranks {
		for i := 0; i < 8; i++ {
			h ^= uint64(byte(r >> (8 * i)))
			h *= 1099511628211
		}
	}
	return h
}
