package algo

// Gather plans a gather of blocks of counts[i] elements to root.
//
// Layout: Work[0:sum(counts)], block i at Offsets(counts)[i], on every rank.
// Before: this rank's own block filled. After: every block on root; on
// other ranks Work is relay space (the Tree plan passes other ranks' blocks
// through it at their own offsets).
//
// Algorithms:
//   - Tree: binomial tree over ranks relative to root, ceil(log2(size))
//     steps. A subtree's blocks are contiguous in relative ranks, so a
//     message covers one range of Work, or two when the ranks wrap past
//     size-1.
//   - Linear: every rank sends its block to root in one step.
func Gather(a Algorithm, rank, size, root int, counts []int) (Plan, error) {
	const op = "gather"
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
		treeGather(b, 0, rank, size, root, off)
	case Linear:
		if rank != root {
			b.send(0, root, Work, off[rank], counts[rank])
			break
		}
		for i := 1; i < size; i++ {
			q := (root + i) % size
			b.recv(0, q, off[q], counts[q], false)
		}
	}
	return b.plan, nil
}

// treeGather adds the binomial gather of the blocks at off to root,
// starting at step base (ceilLog2(n) steps).
func treeGather(b *builder, base, rank, n, root int, off []int) {
	v := mod(rank-root, n)
	treeUp(v, n, func(k, peer, m int, toParent bool) {
		p := (peer + root) % n
		if toParent {
			b.blocks(base+k, p, true, v, min(v+m, n), root, n, off)
		} else {
			b.blocks(base+k, p, false, peer, min(peer+m, n), root, n, off)
		}
	})
}
