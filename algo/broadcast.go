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
