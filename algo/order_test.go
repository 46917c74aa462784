package algo

import (
	"testing"

	"github.com/gocomm/comm/core"
)

// span is a symbolic partial result: the fold of the inputs of ranks
// lo..hi in rank order, of element elem; bad once two spans were joined
// out of order or an element met another.
type span struct {
	elem, lo, hi int
	bad          bool
}

// join is the ordered combination a ⊕ b: defined when b starts where a
// ends.
func join(a, b span) span {
	if a.bad || b.bad || a.elem != b.elem || a.hi+1 != b.lo {
		return span{bad: true}
	}
	return span{elem: a.elem, lo: a.lo, hi: b.hi}
}

// runInOrder executes plans on spans as the native engine does for a
// non-commutative op: a reducing receive from a lower rank is the left
// operand, from a higher rank the right one. work[r] starts as rank r's
// input (plus the plan's scratch).
func runInOrder(plans []Plan, work [][]span) {
	type link struct{ from, to int }
	steps := 0
	for _, p := range plans {
		steps = max(steps, len(p.Steps))
	}
	for i := 0; i < steps; i++ {
		queued := map[link][][]span{}
		for r, p := range plans {
			if i >= len(p.Steps) {
				continue
			}
			for _, c := range p.Steps[i].Copies {
				copy(work[r][c.ToOff:c.ToOff+c.Len], work[r][c.FromOff:c.FromOff+c.Len])
			}
			for _, x := range p.Steps[i].Sends {
				k := link{r, x.Peer}
				queued[k] = append(queued[k], append([]span(nil), work[r][x.Off:x.Off+x.Len]...))
			}
		}
		for r, p := range plans {
			if i >= len(p.Steps) {
				continue
			}
			for _, x := range p.Steps[i].Recvs {
				k := link{x.Peer, r}
				got := queued[k][0]
				queued[k] = queued[k][1:]
				for j, g := range got {
					dst := &work[r][x.Off+j]
					switch {
					case !x.Reduce:
						*dst = g
					case x.Peer < r:
						*dst = join(g, *dst)
					default:
						*dst = join(*dst, g)
					}
				}
			}
		}
	}
}

// foldsInOrder plans kind k with algorithm a on size ranks (count elements
// per rank, or per block for reduce-scatter) and reports whether every
// rank that gets a result gets the rank-ordered fold.
func foldsInOrder(k core.Kind, a Algorithm, size, root, count int) (bool, error) {
	plans := make([]Plan, size)
	work := make([][]span, size)
	counts := EvenCounts(count*size, size)
	for r := range plans {
		var p Plan
		var err error
		n := count
		switch k {
		case core.KindAllReduce:
			p, err = AllReduce(a, r, size, count, 2)
		case core.KindReduce:
			if a == Auto {
				p, err = ReduceInOrder(r, size, root, count)
			} else {
				p, err = Reduce(a, r, size, root, count)
			}
		case core.KindReduceScatter:
			p, err = ReduceScatter(a, r, size, counts)
			n = count * size
		}
		if err != nil {
			return false, err
		}
		plans[r] = p
		work[r] = make([]span, n+p.Scratch)
		for e := 0; e < n; e++ {
			work[r][e] = span{elem: e, lo: r, hi: r}
		}
	}
	runInOrder(plans, work)
	whole := func(r, e int) bool {
		s := work[r][e]
		return !s.bad && s.elem == e && s.lo == 0 && s.hi == size-1
	}
	for r := range plans {
		lo, hi := 0, count
		switch {
		case k == core.KindReduce && r != root:
			continue
		case k == core.KindReduceScatter:
			lo, hi = Offsets(counts)[r], Offsets(counts)[r+1]
		}
		for e := lo; e < hi; e++ {
			if !whole(r, e) {
				return false, nil
			}
		}
	}
	return true, nil
}

// TestKeepsOrder checks KeepsOrder both ways on sizes 1 to 9: every
// algorithm it accepts folds in rank order everywhere, and every one it
// refuses breaks the order for some size (or root), so the engine's
// substitution is needed.
func TestKeepsOrder(t *testing.T) {
	cases := []struct {
		kind  core.Kind
		algos []Algorithm
	}{
		{core.KindAllReduce, []Algorithm{Ring, RecursiveDoubling, HalvingDoubling, Tree, Linear}},
		{core.KindReduce, []Algorithm{Tree, Linear}},
		{core.KindReduceScatter, []Algorithm{Ring, HalvingDoubling, Tree}},
	}
	for _, c := range cases {
		for _, a := range c.algos {
			broken := false
			for size := 1; size <= 9; size++ {
				for root := 0; root < size; root++ {
					if c.kind != core.KindReduce && root > 0 {
						break
					}
					ok, err := foldsInOrder(c.kind, a, size, root, 5)
					if err != nil {
						t.Fatalf("%v/%v size %d root %d: %v", c.kind, a, size, root, err)
					}
					if KeepsOrder(c.kind, a, root) && !ok {
						t.Errorf("%v/%v size %d root %d: KeepsOrder says yes but the fold is out of order", c.kind, a, size, root)
					}
					broken = broken || !ok
					if !KeepsOrder(c.kind, a, root) && InOrder(c.kind, a, root) == a && c.kind != core.KindReduce {
						t.Errorf("%v/%v root %d: InOrder keeps an algorithm that does not keep order", c.kind, a, root)
					}
					// For Reduce to a root other than 0, InOrder's Tree
					// stands for ReduceInOrder's plan (TestReduceInOrder).
					if in := InOrder(c.kind, a, root); !KeepsOrder(c.kind, in, root) && c.kind != core.KindReduce {
						t.Errorf("%v/%v: InOrder gives %v, which does not keep order", c.kind, a, in)
					}
				}
			}
			always := true
			for root := 0; root < 9; root++ {
				always = always && KeepsOrder(c.kind, a, root)
			}
			if !always && !broken {
				t.Errorf("%v/%v: KeepsOrder refuses it for some root, but no size or root broke the order", c.kind, a)
			}
		}
	}
}

// TestReduceInOrder: the tree to rank 0 and the hand-off to root fold in
// rank order for every root, with the rules every plan obeys.
func TestReduceInOrder(t *testing.T) {
	for size := 1; size <= 9; size++ {
		for root := 0; root < size; root++ {
			ok, err := foldsInOrder(core.KindReduce, Auto, size, root, 3)
			if err != nil || !ok {
				t.Fatalf("size %d root %d: in order %v, %v", size, root, ok, err)
			}
			c := cellCase{
				size:   size,
				alg:    Tree,
				plan:   func(r int) (Plan, error) { return ReduceInOrder(r, size, root, 4) },
				layout: func(int) int { return 4 },
				fill: func(r int, work, _ []cell) {
					for e := range work {
						work[e] = orig(e, r)
					}
				},
				check: func(r int, work []cell) error {
					if r != root {
						return nil
					}
					return expectCells(work, 0, func(e int) cell { return reduced(e, size) }, 4)
				},
			}
			if err := c.run(); err != nil {
				t.Fatalf("size %d root %d: %v", size, root, err)
			}
		}
	}
	if _, err := ReduceInOrder(0, 3, 3, 1); err == nil {
		t.Fatal("root 3 of 3 ranks accepted")
	}
}
