package algo

import "github.com/gocomm/comm/core"

// Rank order. A reduction op that is not commutative (a user-defined one)
// must combine the inputs as the rank-ordered fold r0 ⊕ r1 ⊕ ... ⊕ rN-1.
// An engine that applies every reducing receive with the received data
// as the left operand when it comes from a lower rank, and as the right one
// when it comes from a higher rank, gets that fold from the plans for
// which KeepsOrder holds: in them every partial result, sent or kept,
// stands for a contiguous range of ranks, and a receive always joins two
// adjacent ranges (order_test.go checks it symbolically). The others
// (rings, recursive halving, trees rooted elsewhere than rank 0) combine
// ranges out of order and need a commutative op.

// KeepsOrder reports whether plans of algorithm a for kind k, rooted at
// root (rooted kinds only), combine in rank order as described above.
// Kinds that do not reduce always do.
func KeepsOrder(k core.Kind, a Algorithm, root int) bool {
	switch k {
	case core.KindAllReduce:
		return a == RecursiveDoubling || a == Tree || a == Linear
	case core.KindReduce:
		return (a == Tree || a == Linear) && root == 0
	case core.KindReduceScatter, core.KindReduceScatterV:
		return a == Tree
	}
	return true
}

// InOrder returns a for kind k if KeepsOrder holds, else the algorithm to
// use instead for a non-commutative op: recursive doubling for all-reduce
// (log2 rounds, every rank computing the same fold), and the binomial
// tree to rank 0 for reduce-scatter and for reduce (to a root other than
// 0, Tree then stands for ReduceInOrder's plan).
func InOrder(k core.Kind, a Algorithm, root int) Algorithm {
	if KeepsOrder(k, a, root) {
		return a
	}
	switch k {
	case core.KindAllReduce:
		return RecursiveDoubling
	case core.KindReduce, core.KindReduceScatter, core.KindReduceScatterV:
		return Tree
	}
	return a
}

// ReduceInOrder plans a Reduce of count elements to root that combines in
// rank order: the binomial tree reduces to rank 0 (KeepsOrder), and rank
// 0 then hands the result to root in one more step when root is not 0.
// Layout as Reduce's; the plan's Algorithm is Tree.
func ReduceInOrder(rank, size, root, count int) (Plan, error) {
	if err := checkRoot("reduce", root, size); err != nil {
		return Plan{}, err
	}
	p, err := Reduce(Tree, rank, size, 0, count)
	if err != nil || root == 0 || size == 1 || count == 0 {
		return p, err
	}
	b := &builder{plan: p}
	last := ceilLog2(size)
	switch rank {
	case 0:
		b.send(last, root, Work, 0, count)
	case root:
		b.recv(last, 0, 0, count, false)
	}
	return b.plan, nil
}
