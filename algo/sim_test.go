package algo

import (
	"fmt"
	"strings"
	"testing"
)

// simulate runs the plans of all ranks (plans[r] is rank r's) the way the
// engine does, checking the rules of Step and the guarantees of the package
// on the way, and returns the first violation. work[r] must hold
// layout[r]+plans[r].Scratch elements; input[r] may be nil. combine(dst,
// src) is the reduction.
//
// A step runs as: every rank's copies, then every rank's sends read (after
// the copies and before any receive writes, which the rules make equivalent
// to running them concurrently), then every rank's receives matched against
// the messages queued for them.
func simulate[T any](plans []Plan, work, input [][]T, layout []int, combine func(dst, src T) T) error {
	n := len(plans)
	steps := 0
	for r, p := range plans {
		if p.Scratch < 0 {
			return fmt.Errorf("rank %d: negative Scratch %d", r, p.Scratch)
		}
		if len(work[r]) != layout[r]+p.Scratch {
			return fmt.Errorf("test setup: rank %d work has %d elements, want layout %d + scratch %d", r, len(work[r]), layout[r], p.Scratch)
		}
		steps = max(steps, len(p.Steps))
	}
	buf := func(r int, b Buf) ([]T, error) {
		switch b {
		case Work:
			return work[r], nil
		case Input:
			if input == nil || input[r] == nil {
				return nil, fmt.Errorf("reads Input, which this operation does not have")
			}
			return input[r], nil
		}
		return nil, fmt.Errorf("unknown buffer %v", b)
	}
	// inRange checks [off, off+n) against a buffer of size size whose first
	// layout elements are the operation's layout.
	inRange := func(b Buf, off, cnt, size, layout int) error {
		if off < 0 || cnt < 0 || off+cnt > size {
			return fmt.Errorf("%v[%d:+%d] out of bounds (buffer has %d elements)", b, off, cnt, size)
		}
		if b == Work && cnt > 0 && off < layout && off+cnt > layout {
			return fmt.Errorf("%v[%d:+%d] straddles the end of the layout at %d", b, off, cnt, layout)
		}
		return nil
	}
	type link struct{ from, to int }
	marks := make([][]uint8, n) // per rank, per Work element: 1 read by a send, 2 written by a receive
	for r := range marks {
		marks[r] = make([]uint8, len(work[r]))
	}
	for i := 0; i < steps; i++ {
		for r, p := range plans {
			if i >= len(p.Steps) {
				continue
			}
			for j, c := range p.Steps[i].Copies {
				src, err := buf(r, c.From)
				if err == nil {
					err = inRange(c.From, c.FromOff, c.Len, len(src), layout[r])
				}
				if err == nil {
					err = inRange(Work, c.ToOff, c.Len, len(work[r]), layout[r])
				}
				if err == nil && c.From == Work && c.Len > 0 && c.FromOff < c.ToOff+c.Len && c.ToOff < c.FromOff+c.Len {
					err = fmt.Errorf("source and destination overlap")
				}
				if err != nil {
					return fmt.Errorf("rank %d step %d copy %d %+v: %v", r, i, j, c, err)
				}
				copy(work[r][c.ToOff:c.ToOff+c.Len], src[c.FromOff:c.FromOff+c.Len])
			}
		}
		queues := map[link][][]T{}
		for r, p := range plans {
			clear(marks[r])
			if i >= len(p.Steps) {
				continue
			}
			for j, x := range p.Steps[i].Sends {
				src, err := buf(r, x.Buf)
				if err == nil {
					err = checkPeer(x, r, n)
				}
				if err == nil {
					err = inRange(x.Buf, x.Off, x.Len, len(src), layout[r])
				}
				if err == nil && x.Reduce {
					err = fmt.Errorf("Reduce set on a send")
				}
				if err != nil {
					return fmt.Errorf("rank %d step %d send %d %+v: %v", r, i, j, x, err)
				}
				if x.Buf == Work {
					for e := x.Off; e < x.Off+x.Len; e++ {
						marks[r][e] |= 1
					}
				}
				l := link{r, x.Peer}
				queues[l] = append(queues[l], append([]T(nil), src[x.Off:x.Off+x.Len]...))
			}
		}
		for r, p := range plans {
			if i >= len(p.Steps) {
				continue
			}
			for j, x := range p.Steps[i].Recvs {
				err := checkPeer(x, r, n)
				if err == nil && x.Buf != Work {
					err = fmt.Errorf("receive into %v, want Work", x.Buf)
				}
				if err == nil {
					err = inRange(Work, x.Off, x.Len, len(work[r]), layout[r])
				}
				if err != nil {
					return fmt.Errorf("rank %d step %d recv %d %+v: %v", r, i, j, x, err)
				}
				for e := x.Off; e < x.Off+x.Len; e++ {
					if marks[r][e]&1 != 0 {
						return fmt.Errorf("rank %d step %d recv %d %+v: writes Work[%d], which a send of the same step reads", r, i, j, x, e)
					}
					if marks[r][e]&2 != 0 {
						return fmt.Errorf("rank %d step %d recv %d %+v: writes Work[%d], which another receive of the same step writes", r, i, j, x, e)
					}
					marks[r][e] |= 2
				}
				l := link{x.Peer, r}
				q := queues[l]
				if len(q) == 0 {
					return fmt.Errorf("rank %d step %d recv %d %+v: rank %d sends no matching message in step %d", r, i, j, x, x.Peer, i)
				}
				data := q[0]
				queues[l] = q[1:]
				if len(data) != x.Len {
					return fmt.Errorf("rank %d step %d recv %d %+v: rank %d's matching send has Len %d", r, i, j, x, x.Peer, len(data))
				}
				dst := work[r][x.Off : x.Off+x.Len]
				for e, v := range data {
					if x.Reduce {
						dst[e] = combine(dst[e], v)
					} else {
						dst[e] = v
					}
				}
			}
		}
		for l, q := range queues {
			if len(q) > 0 {
				return fmt.Errorf("step %d: %d message(s) from rank %d to rank %d have no matching receive", i, len(q), l.from, l.to)
			}
		}
	}
	return nil
}

func checkPeer(x Xfer, r, n int) error {
	if x.Peer == r {
		return fmt.Errorf("peer is the rank itself")
	}
	if x.Peer < 0 || x.Peer >= n {
		return fmt.Errorf("peer %d out of range [0, %d)", x.Peer, n)
	}
	return nil
}

// cell is a simulated element that records what it is made of: the element
// index it belongs to, the set of ranks whose contribution it holds and how
// many contributions that were. A reduction of the wrong elements, a lost
// contribution and a double-counted one all show.
type cell struct {
	elem int    // -1: never written; -2: a reduction of different elements
	mask uint64 // contributing ranks
	n    int    // number of contributions
}

var poison = cell{elem: -1}

func combineCells(dst, src cell) cell {
	if dst.elem != src.elem || dst.elem < 0 {
		return cell{elem: -2}
	}
	return cell{elem: dst.elem, mask: dst.mask | src.mask, n: dst.n + src.n}
}

// orig is element e as rank r's input holds it.
func orig(e, r int) cell { return cell{elem: e, mask: 1 << r, n: 1} }

// reduced is element e reduced over ranks 0..size-1.
func reduced(e, size int) cell { return cell{elem: e, mask: 1<<size - 1, n: size} }

// expectCells compares got[from:from+len(want)] with want.
func expectCells(got []cell, from int, want func(e int) cell, to int) error {
	for e := from; e < to; e++ {
		if w := want(e); got[e] != w {
			return fmt.Errorf("element %d = %+v, want %+v", e, got[e], w)
		}
	}
	return nil
}

// runCells simulates one collective on cells: plan(r) gives rank r's plan,
// layout(r) its Work layout size, fill(r, work, input) its buffers before
// (Work starts poisoned; input is nil unless hasInput), check(r, work) its
// result.
type cellCase struct {
	size     int
	alg      Algorithm
	plan     func(r int) (Plan, error)
	layout   func(r int) int
	hasInput func(r int) int // input length, or nil for no Input
	fill     func(r int, work, input []cell)
	check    func(r int, work []cell) error
}

func (c cellCase) run() error {
	plans := make([]Plan, c.size)
	work := make([][]cell, c.size)
	layout := make([]int, c.size)
	var input [][]cell
	if c.hasInput != nil {
		input = make([][]cell, c.size)
	}
	for r := range plans {
		p, err := c.plan(r)
		if err != nil {
			return fmt.Errorf("rank %d: %v", r, err)
		}
		if p.Algorithm != c.alg {
			return fmt.Errorf("rank %d: plan says algorithm %v, want %v", r, p.Algorithm, c.alg)
		}
		plans[r] = p
		layout[r] = c.layout(r)
		work[r] = make([]cell, layout[r]+p.Scratch)
		for e := range work[r] {
			work[r][e] = poison
		}
		if input != nil {
			input[r] = make([]cell, c.hasInput(r))
		}
		var in []cell
		if input != nil {
			in = input[r]
		}
		c.fill(r, work[r], in)
	}
	if err := simulate(plans, work, input, layout, combineCells); err != nil {
		return err
	}
	for r := range plans {
		if err := c.check(r, work[r][:layout[r]]); err != nil {
			return fmt.Errorf("rank %d: %v", r, err)
		}
	}
	return nil
}

// TestSimulatorRejects shows that the simulator catches every rule a plan
// can break, so that the property tests passing means something.
func TestSimulatorRejects(t *testing.T) {
	send := func(peer int, b Buf, off, n int) Xfer { return Xfer{Peer: peer, Buf: b, Off: off, Len: n} }
	recv := func(peer, off, n int) Xfer { return Xfer{Peer: peer, Buf: Work, Off: off, Len: n} }
	one := func(sends, recvs []Xfer) Plan { return Plan{Steps: []Step{{Sends: sends, Recvs: recvs}}} }
	ok1 := one(nil, []Xfer{recv(0, 0, 2)})
	cases := []struct {
		name  string
		plans [2]Plan
		want  string
	}{
		{"length mismatch", [2]Plan{one([]Xfer{send(1, Work, 0, 2)}, nil), one(nil, []Xfer{recv(0, 0, 3)})}, "matching send has Len 2"},
		{"self peer", [2]Plan{one([]Xfer{send(0, Work, 0, 2)}, nil), {}}, "the rank itself"},
		{"peer out of range", [2]Plan{one([]Xfer{send(2, Work, 0, 2)}, nil), {}}, "out of range"},
		{"out of bounds", [2]Plan{one([]Xfer{send(1, Work, 3, 2)}, nil), one(nil, []Xfer{recv(0, 0, 2)})}, "out of bounds"},
		{"negative offset", [2]Plan{one([]Xfer{send(1, Work, -1, 2)}, nil), ok1}, "out of bounds"},
		{"receive over a send", [2]Plan{
			one([]Xfer{send(1, Work, 0, 2)}, []Xfer{recv(1, 1, 2)}),
			one([]Xfer{send(0, Work, 0, 2)}, []Xfer{recv(0, 2, 2)})}, "which a send of the same step reads"},
		{"overlapping receives", [2]Plan{
			one([]Xfer{send(1, Work, 0, 2), send(1, Work, 2, 2)}, nil),
			one(nil, []Xfer{recv(0, 0, 2), recv(0, 1, 2)})}, "another receive"},
		{"unmatched send", [2]Plan{one([]Xfer{send(1, Work, 0, 2)}, nil), {}}, "no matching receive"},
		{"unmatched receive", [2]Plan{{}, one(nil, []Xfer{recv(0, 0, 2)})}, "no matching message"},
		{"different steps", [2]Plan{one([]Xfer{send(1, Work, 0, 2)}, nil), {Steps: []Step{{}, {Recvs: []Xfer{recv(0, 0, 2)}}}}}, "no matching receive"},
		{"reduce on a send", [2]Plan{one([]Xfer{{Peer: 1, Off: 0, Len: 2, Reduce: true}}, nil), ok1}, "Reduce set on a send"},
		{"receive into input", [2]Plan{one([]Xfer{send(1, Work, 0, 2)}, nil), one(nil, []Xfer{{Peer: 0, Buf: Input, Len: 2}})}, "want Work"},
		{"input without input", [2]Plan{one([]Xfer{send(1, Input, 0, 2)}, nil), ok1}, "does not have"},
		{"straddles layout", [2]Plan{{Scratch: 2, Steps: []Step{{Sends: []Xfer{send(1, Work, 3, 2)}}}}, ok1}, "straddles"},
		{"overlapping copy", [2]Plan{{Steps: []Step{{Copies: []Copy{{From: Work, FromOff: 0, ToOff: 1, Len: 2}}}}}, {}}, "overlap"},
		{"negative scratch", [2]Plan{{Scratch: -1}, {}}, "negative Scratch"},
	}
	for _, c := range cases {
		work := make([][]cell, 2)
		for r := range work {
			work[r] = make([]cell, 4+max(c.plans[r].Scratch, 0))
		}
		err := simulate(c.plans[:], work, nil, []int{4, 4}, combineCells)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: simulate = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestCellsCatchDoubleCounting: a plan that follows the rules but reduces a
// contribution twice, or misses one, fails the reference check.
func TestCellsCatchDoubleCounting(t *testing.T) {
	twice := func(r int) (Plan, error) {
		b := newBuilder(Ring)
		if r == 0 {
			b.send(0, 1, Work, 0, 2)
			b.send(1, 1, Work, 0, 2)
		} else {
			b.recv(0, 0, 0, 2, true)
			b.recv(1, 0, 0, 2, true)
		}
		return b.plan, nil
	}
	c := reduceCase(Ring, 2, 1, 2)
	c.plan = twice
	if err := c.run(); err == nil || !strings.Contains(err.Error(), "n:3") {
		t.Errorf("double counting: run = %v, want a count of 3", err)
	}
	c.plan = func(int) (Plan, error) { return Plan{Algorithm: Ring}, nil }
	if err := c.run(); err == nil {
		t.Error("missing contribution: run succeeded")
	}
}
