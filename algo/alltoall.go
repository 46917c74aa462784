package algo

import "fmt"

// AllToAll plans an all-to-all exchange: sendCounts[i] elements go to rank
// i, recvCounts[i] elements come from rank i. Rank i's sendCounts[j] must
// equal rank j's recvCounts[i]; a rank's own send and receive counts must
// be equal.
//
// Layout: Input[0:sum(sendCounts)] holds the blocks by destination at
// Offsets(sendCounts); Work[0:sum(recvCounts)] receives them by source at
// Offsets(recvCounts). Input and Work must not overlap. Before: Input
// filled. After: Work holds every source's block; the own block is moved by
// a Copy from Input in step 0.
//
// Algorithms:
//   - Pairwise: size-1 steps; in step i-1 (i = 1..size-1) a rank sends to
//     rank+i and receives from rank-i (mod size).
//   - Linear: every send and receive in one step.
//
// Messages of zero elements are kept (unlike in the other plans), so that
// counts the ranks disagree on surface as a length mismatch, not a hang.
func AllToAll(a Algorithm, rank, size int, sendCounts, recvCounts []int) (Plan, error) {
	const op = "alltoall"
	if err := checkGroup(op, a, rank, size); err != nil {
		return Plan{}, err
	}
	if err := checkCounts(op, "sendCounts", sendCounts, size); err != nil {
		return Plan{}, err
	}
	if err := checkCounts(op, "recvCounts", recvCounts, size); err != nil {
		return Plan{}, err
	}
	if sendCounts[rank] != recvCounts[rank] {
		return Plan{}, fmt.Errorf("%w: %s: rank %d sends itself %d elements (sendCounts[%d]) but receives %d (recvCounts[%d]); they must be equal",
			ErrInvalid, op, rank, sendCounts[rank], rank, recvCounts[rank], rank)
	}
	b := newBuilder(a)
	b.keepEmpty = true
	soff, roff := Offsets(sendCounts), Offsets(recvCounts)
	b.copyTo(0, Input, soff[rank], roff[rank], sendCounts[rank])
	for i := 1; i < size; i++ {
		to, from := (rank+i)%size, mod(rank-i, size)
		step := i - 1
		if a == Linear {
			step = 0
		}
		b.send(step, to, Input, soff[to], sendCounts[to])
		b.recv(step, from, roff[from], recvCounts[from], false)
	}
	return b.plan, nil
}

// Barrier plans a barrier: zero-length messages only, no buffer. No rank
// finishes the plan before every rank has started it.
//
// Algorithms:
//   - RecursiveDoubling: dissemination, ceil(log2(size)) steps; in step k
//     a rank sends to rank+2^k and receives from rank-2^k (mod size).
//   - Tree: binomial gather to rank 0 then binomial broadcast from it,
//     2 ceil(log2(size)) steps.
func Barrier(a Algorithm, rank, size int) (Plan, error) {
	const op = "barrier"
	if err := checkGroup(op, a, rank, size); err != nil {
		return Plan{}, err
	}
	b := newBuilder(a)
	b.keepEmpty = true
	switch a {
	case RecursiveDoubling:
		for k, d := 0, 1; d < size; k, d = k+1, d<<1 {
			b.send(k, (rank+d)%size, Work, 0, 0)
			b.recv(k, mod(rank-d, size), 0, 0, false)
		}
	case Tree:
		treeUp(rank, size, func(k, peer, _ int, toParent bool) {
			if toParent {
				b.send(k, peer, Work, 0, 0)
			} else {
				b.recv(k, peer, 0, 0, false)
			}
		})
		base := ceilLog2(size)
		treeDown(rank, size, func(k, peer, _ int, fromParent bool) {
			if fromParent {
				b.recv(base+k, peer, 0, 0, false)
			} else {
				b.send(base+k, peer, Work, 0, 0)
			}
		})
	}
	return b.plan, nil
}
