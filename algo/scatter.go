package algo

// Scatter plans a scatter of blocks of counts[i] elements from root.
//
// Layout: Work[0:sum(counts)], block i at Offsets(counts)[i], on every rank.
// Before: every block on root. After: every rank holds its own block at its
// offset; the rest of a non-root's Work is relay space.
//
// Algorithms:
//   - Tree: binomial tree over ranks relative to root, ceil(log2(size))
//     steps; a message carries a subtree's blocks (two messages when the
//     ranks wrap past size-1).
//   - Linear: root sends every rank its block in one step.
func Scatter(a Algorithm, rank, size, root int, counts []int) (Plan, error) {
	const op = "scatter"
	if err := checkGroup(op, a, rank, size); err != nil {
		return Plan{}, err
	}
	if err := checkRoot(op, root, size); err != nil {
		return Plan{}, err
	}
	if err := checkCounts(op, "counts", counts, size); err != nil {
		return Plan{}, err
	}
	b := newBuilder(a)
	off := Offsets(counts)
	if size == 1 || off[size] == 0 {
		return b.plan, nil
	}
	switch a {
	case Tree:
		treeScatter(b, 0, rank, size, root, off)
	case Linear:
		if rank != root {
			b.recv(0, root, off[rank], counts[rank], false)
			break
		}
		for i := 1; i < size; i++ {
			q := (root + i) % size
			b.send(0, q, Work, off[q], counts[q])
		}
	}
	return b.plan, nil
}

// treeScatter adds the binomial scatter of the blocks at off from root,
// starting at step base (ceilLog2(n) steps).
func treeScatter(b *builder, base, rank, n, root int, off []int) {
	v := mod(rank-root, n)
	treeDown(v, n, func(k, peer, m int, fromParent bool) {
		p := (peer + root) % n
		if fromParent {
			b.blocks(base+k, p, false, v, min(v+m, n), root, n, off)
		} else {
			b.blocks(base+k, p, true, peer, min(peer+m, n), root, n, off)
		}
	})
}
