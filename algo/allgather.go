package algo

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
