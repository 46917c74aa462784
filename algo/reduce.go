package algo

// AllReduce plans an all-reduce of count elements for rank of size.
//
// Layout: Work[0:count]. Before: this rank's input. After: on every rank,
// the reduction of all ranks' inputs, with the same bits on every rank (each
// result element is computed once and copied, or computed by partners that
// combine the same two operands). RecursiveDoubling plans use Plan.Scratch =
// count extra elements of Work after the result.
//
// Algorithms:
//   - Ring: reduce-scatter then all-gather around the ring over the blocks
//     EvenCounts(count, size); 2(size-1) steps.
//   - RecursiveDoubling: full-vector exchange with core partner c^2^k,
//     log2(p) steps, p the largest power of two <= size; for other sizes
//     the extra ranks first fold their input into a core rank and get the
//     result back at the end (two more steps).
//   - HalvingDoubling (Rabenseifner): recursive-halving reduce-scatter over
//     EvenCounts(count, p) then recursive-doubling all-gather, 2 log2(p)
//     steps, with the same folding.
//   - Tree: binomial reduce to rank 0 then binomial broadcast from rank 0,
//     2 ceil(log2(size)) steps.
//   - Linear: rank 0 receives and reduces the input of rank 1, 2, ...,
//     one per step, then sends the result to every rank in one step; size
//     steps, every other rank only sends once and receives once (Open
//     MPI's basic_linear: the fewest hand-offs, for ranks that share few
//     CPUs).
//
// chunk > 0 cuts every message of every algorithm into pieces of at most
// chunk elements, sent in order within the same step (so an engine may
// reduce one piece while the next arrives); 0 sends whole messages.
func AllReduce(a Algorithm, rank, size, count, chunk int) (Plan, error) {
	const op = "allreduce"
	if err := checkGroup(op, a, rank, size); err != nil {
		return Plan{}, err
	}
	if err := checkCount(op, count); err != nil {
		return Plan{}, err
	}
	if err := checkChunk(op, chunk); err != nil {
		return Plan{}, err
	}
	b := newBuilder(a)
	b.chunk = chunk
	if size == 1 || count == 0 {
		return b.plan, nil
	}
	switch a {
	case Ring:
		off := Offsets(EvenCounts(count, size))
		ringReduceScatter(b, 0, rank, size, off)
		ringAllGather(b, size-1, rank, size, off)
	case RecursiveDoubling:
		rdAllReduce(b, rank, size, count)
	case HalvingDoubling:
		hdAllReduce(b, rank, size, count)
	case Tree:
		treeReduce(b, 0, rank, size, 0, count)
		treeBroadcast(b, ceilLog2(size), rank, size, 0, count)
	case Linear:
		if rank != 0 {
			b.send(rank-1, 0, Work, 0, count)
			b.recv(size-1, 0, 0, count, false)
			break
		}
		for i := 1; i < size; i++ {
			b.recv(i-1, i, 0, count, true)
		}
		for i := 1; i < size; i++ {
			b.send(size-1, i, Work, 0, count)
		}
	}
	return b.plan, nil
}

// Reduce plans a reduction of count elements to root.
//
// Layout: Work[0:count]. Before: this rank's input. After: the reduction of
// all inputs on root; other ranks' Work is scratch.
//
// Algorithms:
//   - Tree: binomial tree over ranks relative to root, ceil(log2(size))
//     steps; every element is reduced once per tree edge.
//   - Linear: the root receives and reduces the input of root+1, root+2, ...
//     (mod size), one per step, size-1 steps.
func Reduce(a Algorithm, rank, size, root, count int) (Plan, error) {
	const op = "reduce"
	if err := checkGroup(op, a, rank, size); err != nil {
		return Plan{}, err
	}
	if err := checkRoot(op, root, size); err != nil {
		return Plan{}, err
	}
	if err := checkCount(op, count); err != nil {
		return Plan{}, err
	}
	b := newBuilder(a)
	if size == 1 || count == 0 {
		return b.plan, nil
	}
	switch a {
	case Tree:
		treeReduce(b, 0, rank, size, root, count)
	case Linear:
		if rank == root {
			for i := 0; i < size-1; i++ {
				b.recv(i, (root+1+i)%size, 0, count, true)
			}
		} else {
			b.send(mod(rank-root, size)-1, root, Work, 0, count)
		}
	}
	return b.plan, nil
}

// ReduceScatter plans a reduce-scatter of blocks of counts[i] elements.
//
// Layout: Work[0:sum(counts)], block i at Offsets(counts)[i]. Before: this
// rank's full input. After: Work[Offsets(counts)[rank]:][:counts[rank]]
// holds the reduction of that block over all ranks; the rest of Work is
// scratch.
//
// Algorithms:
//   - Ring: size-1 steps; in step s a rank reduces block rank-s-2 from its
//     left neighbour and passes block rank-s-1 to its right one.
//   - HalvingDoubling: recursive halving over the core of p ranks (p the
//     largest power of two <= size), log2(p) steps, any counts. For other
//     sizes odd ranks below 2(size-p) first fold their whole input into the
//     rank before them, which halves over both ranks' blocks (adjacent, so
//     every message stays contiguous) and hands the odd rank its block in
//     a last step.
//   - Tree: binomial reduce of the whole buffer to rank 0, then binomial
//     scatter of the blocks, 2 ceil(log2(size)) steps.
func ReduceScatter(a Algorithm, rank, size int, counts []int) (Plan, error) {
	const op = "reducescatter"
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
		ringReduceScatter(b, 0, rank, size, off)
	case HalvingDoubling:
		hdReduceScatter(b, rank, size, off)
	case Tree:
		treeReduce(b, 0, rank, size, 0, off[size])
		treeScatter(b, ceilLog2(size), rank, size, 0, off)
	}
	return b.plan, nil
}

// ringReduceScatter adds the n-1 steps of a ring reduce-scatter of the
// blocks at off, starting at step base. Afterwards rank holds the reduced
// block rank. Each block is reduced along the ring in one fixed order, once
// per element.
func ringReduceScatter(b *builder, base, rank, n int, off []int) {
	next, prev := (rank+1)%n, mod(rank-1, n)
	for s := 0; s < n-1; s++ {
		sb, rb := mod(rank-s-1, n), mod(rank-s-2, n)
		b.send(base+s, next, Work, off[sb], off[sb+1]-off[sb])
		b.recv(base+s, prev, off[rb], off[rb+1]-off[rb], true)
	}
}

// ringAllGather adds the n-1 steps of a ring all-gather of the blocks at
// off, starting at step base, for a rank that holds block rank.
func ringAllGather(b *builder, base, rank, n int, off []int) {
	next, prev := (rank+1)%n, mod(rank-1, n)
	for s := 0; s < n-1; s++ {
		sb, rb := mod(rank-s, n), mod(rank-s-1, n)
		b.send(base+s, next, Work, off[sb], off[sb+1]-off[sb])
		b.recv(base+s, prev, off[rb], off[rb+1]-off[rb], false)
	}
}

// rdAllReduce: a full-vector exchange needs the outgoing vector to stay
// intact while the incoming one is reduced into the result, so each round
// first copies the result into the scratch half Work[count:2count] and
// sends from there.
func rdAllReduce(b *builder, rank, n, count int) {
	f := newFold(n)
	base := f.base()
	c := f.core(rank)
	if c < 0 {
		b.send(0, rank-1, Work, 0, count)
		b.recv(base+f.rounds, rank-1, 0, count, false)
		return
	}
	if f.hasExtra(c) {
		b.recv(0, rank+1, 0, count, true)
	}
	for k := 0; k < f.rounds; k++ {
		peer := f.rank(c ^ 1<<k)
		b.copyTo(base+k, Work, 0, count, count)
		b.send(base+k, peer, Work, count, count)
		b.recv(base+k, peer, 0, count, true)
	}
	if f.rounds > 0 {
		b.plan.Scratch = count
	}
	if f.hasExtra(c) {
		b.send(base+f.rounds, rank+1, Work, 0, count)
	}
}

// hdAllReduce is Rabenseifner's all-reduce over the core of a fold: core
// rank c ends the halving with the reduced block c of EvenCounts(count, p).
func hdAllReduce(b *builder, rank, n, count int) {
	f := newFold(n)
	base := f.base()
	c := f.core(rank)
	last := base + 2*f.rounds
	if c < 0 {
		b.send(0, rank-1, Work, 0, count)
		b.recv(last, rank-1, 0, count, false)
		return
	}
	if f.hasExtra(c) {
		b.recv(0, rank+1, 0, count, true)
	}
	off := Offsets(EvenCounts(count, f.p))
	span := func(lo, hi int) (int, int) { return off[lo], off[hi] - off[lo] }
	lo, hi := halve(b, base, c, f, span)
	for k := 0; k < f.rounds; k++ {
		m := 1 << k
		peer := f.rank(c ^ m)
		o, l := span(lo, hi)
		b.send(base+f.rounds+k, peer, Work, o, l)
		w := hi - lo
		if c&m == 0 {
			o, l = span(hi, hi+w)
			hi += w
		} else {
			o, l = span(lo-w, lo)
			lo -= w
		}
		b.recv(base+f.rounds+k, peer, o, l, false)
	}
	if f.hasExtra(c) {
		b.send(last, rank+1, Work, 0, count)
	}
}

// halve adds the f.rounds recursive-halving steps for core rank c, starting
// at step base, over the slots 0..p-1, slot i being the elements span(i,
// i+1). In each round the partner c^m (m = p/2, p/4, ..., 1) shares the
// same range of slots; c keeps the half its bit m selects, reduces the
// partner's copy of it in, and sends the other half. It returns the range
// c keeps, [c, c+1).
func halve(b *builder, base, c int, f fold, span func(lo, hi int) (off, n int)) (lo, hi int) {
	lo, hi = 0, f.p
	for k := 0; k < f.rounds; k++ {
		m := f.p >> (k + 1)
		peer := f.rank(c ^ m)
		mid := (lo + hi) / 2
		var o, l int
		if c&m == 0 {
			o, l = span(mid, hi)
			hi = mid
		} else {
			o, l = span(lo, mid)
			lo = mid
		}
		b.send(base+k, peer, Work, o, l)
		o, l = span(lo, hi)
		b.recv(base+k, peer, o, l, true)
	}
	return lo, hi
}

// hdReduceScatter halves over core slots; slot c of the fold stands for the
// blocks of core rank c and of its extra (adjacent blocks), so a range of
// slots is one contiguous range of elements.
func hdReduceScatter(b *builder, rank, n int, off []int) {
	f := newFold(n)
	base := f.base()
	c := f.core(rank)
	total := off[n]
	if c < 0 {
		b.send(0, rank-1, Work, 0, total)
		b.recv(base+f.rounds, rank-1, off[rank], off[rank+1]-off[rank], false)
		return
	}
	if f.hasExtra(c) {
		b.recv(0, rank+1, 0, total, true)
	}
	first := func(slot int) int { return off[f.rank(slot)] } // f.rank(p) == n
	halve(b, base, c, f, func(lo, hi int) (int, int) { return first(lo), first(hi) - first(lo) })
	if f.hasExtra(c) {
		b.send(base+f.rounds, rank+1, Work, off[rank+1], off[rank+2]-off[rank+1])
	}
}

// treeReduce adds the binomial reduction of Work[0:count] to root, starting
// at step base (ceilLog2(n) steps).
func treeReduce(b *builder, base, rank, n, root, count int) {
	treeUp(mod(rank-root, n), n, func(k, peer, _ int, toParent bool) {
		p := (peer + root) % n
		if toParent {
			b.send(base+k, p, Work, 0, count)
		} else {
			b.recv(base+k, p, 0, count, true)
		}
	})
}
