package algo

// Broadcast plans a broadcast of count elements from root.
//
// Layout: Work[0:count]. Before: the data on root (other ranks' Work is
// overwritten). After: the data on every rank.
//
// Algorithms:
//   - Tree: binomial tree over ranks relative to root, ceil(log2(size))
//     steps.
//   - Ring: a pipelined chain root -> root+1 -> ... -> root-1 (mod size).
//     The data is cut into pieces of at most chunk elements (one piece when
//     chunk is 0); piece k crosses hop h in step k+h, so pieces overlap and
//     the plan has pieces+size-2 steps.
//   - Linear: the root sends to every other rank in one step.
//
// Tree and Linear ignore chunk.
func Broadcast(a Algorithm, rank, size, root, count, chunk int) (Plan, error) {
	const op = "broadcast"
	if err := checkGroup(op, a, rank, size); err != nil {
		return Plan{}, err
	}
	if err := checkRoot(op, root, size); err != nil {
		return Plan{}, err
	}
	if err := checkCount(op, count); err != nil {
		return Plan{}, err
	}
	if err := checkChunk(op, chunk); err != nil {
		return Plan{}, err
	}
	b := newBuilder(a)
	if size == 1 || count == 0 {
		return b.plan, nil
	}
	switch a {
	case Tree:
		treeBroadcast(b, 0, rank, size, root, count)
	case Ring:
		piece := count
		if chunk > 0 && chunk < count {
			piece = chunk
		}
		v := mod(rank-root, size)
		next, prev := (rank+1)%size, mod(rank-1, size)
		for k, o := 0, 0; o < count; k, o = k+1, o+piece {
			l := min(piece, count-o)
			if v > 0 {
				b.recv(k+v-1, prev, o, l, false)
			}
			if v < size-1 {
				b.send(k+v, next, Work, o, l)
			}
		}
	case Linear:
		if rank != root {
			b.recv(0, root, 0, count, false)
			break
		}
		for i := 1; i < size; i++ {
			b.send(0, (root+i)%size, Work, 0, count)
		}
	}
	return b.plan, nil
}

// AllGather plans an all-gather of blocks of counts[i] elements.
//
// Layout: Work[0:sum(counts)], block i at Offsets(counts)[i]. Before: this
// rank's own block filled (the rest is overwritten). After: every block on
// every rank.
//
// Algorithms:
//   - Ring: size-1 steps; in step s a rank passes block rank-s to its right
//     neighbour and receives block rank-s-1 from its left one.
//   - RecursiveDoubling: ceil(log2(size)) steps. For a power-of-two size
//     partners rank^2^k swap the contiguous blocks of their groups. For
//     other sizes it is a dissemination (Bruck) all-gather with every block
//     at its final offset: in step k a rank sends the blocks rank ..
//     rank+2^k-1 (mod size) that it holds to rank-2^k and receives the next
//     ones from rank+2^k; a wrapped range takes two messages.
//   - Tree: binomial gather to rank 0 then binomial broadcast of the whole
//     buffer, 2 ceil(log2(size)) steps.
func AllGather(a Algorithm, rank, size int, counts []int) (Plan, error) {
	const op = "allgather"
	if err := checkGroup(op, a, rank, size); err != nil {
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
	case Ring:
		ringAllGather(b, 0, rank, size, off)
	case RecursiveDoubling:
		if size&(size-1) == 0 {
			for k, m := 0, 1; m < size; k, m = k+1, m<<1 {
				peer := rank ^ m
				mine, theirs := rank&^(m-1), peer&^(m-1)
				b.send(k, peer, Work, off[mine], off[mine+m]-off[mine])
				b.recv(k, peer, off[theirs], off[theirs+m]-off[theirs], false)
			}
			break
		}
		for k, d := 0, 1; d < size; k, d = k+1, d<<1 {
			cnt := min(d, size-d)
			b.blocks(k, mod(rank-d, size), true, 0, cnt, rank, size, off)
			b.blocks(k, (rank+d)%size, false, d, d+cnt, rank, size, off)
		}
	case Tree:
		treeGather(b, 0, rank, size, 0, off)
		treeBroadcast(b, ceilLog2(size), rank, size, 0, off[size])
	}
	return b.plan, nil
}

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

// treeBroadcast adds the binomial broadcast of Work[0:count] from root,
// starting at step base (ceilLog2(n) steps).
func treeBroadcast(b *builder, base, rank, n, root, count int) {
	treeDown(mod(rank-root, n), n, func(k, peer, _ int, fromParent bool) {
		p := (peer + root) % n
		if fromParent {
			b.recv(base+k, p, 0, count, false)
		} else {
			b.send(base+k, p, Work, 0, count)
		}
	})
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
