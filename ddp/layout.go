package ddp

// Layout says where the gradients of one bucket live in it.
type Layout struct {
	// Index is the bucket's place in the order buckets are started in.
	Index int
	// Grads are the indices (in registration order) of the bucket's
	// gradients, in the order they are laid out in the bucket.
	Grads []int
	// Offsets[j] is the element offset of gradient Grads[j] in the bucket.
	Offsets []int
	// Len is the bucket's length in elements.
	Len int
	// Epoch is 0 for the buckets New builds and 1 once they are rebuilt
	// after the first synced step: a hook that keeps state per bucket
	// starts that state afresh when it changes.
	Epoch int
}

// defaultOrder is the order New fills buckets in: registration order
// reversed, because backward produces the gradients of the last layers
// first.
func defaultOrder(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = n - 1 - i
	}
	return order
}

// assignBuckets groups the gradients, taken in order, into consecutive
// buckets: the first holds at most firstCap bytes, the others at most
// bucketCap, and a gradient larger than the cap is a bucket of its own.
// numel[i] is gradient i's element count and elemSize the bytes of one
// element. It is pure: New and the rebuild call it with the same
// arguments on every rank and so get the same buckets.
func assignBuckets(order, numel []int, elemSize, firstCap, bucketCap int) [][]int {
	var buckets [][]int
	var cur []int
	bytes := 0
	limit := firstCap
	for _, g := range order {
		size := numel[g] * elemSize
		if len(cur) > 0 && bytes+size > limit {
			buckets = append(buckets, cur)
			cur, bytes, limit = nil, 0, bucketCap
		}
		cur = append(cur, g)
		bytes += size
	}
	if len(cur) > 0 {
		buckets = append(buckets, cur)
	}
	return buckets
}

// layouts turns groups of gradients into bucket layouts of the given
// epoch, each gradient's elements contiguous in its bucket in group order.
func layouts(groups [][]int, numel []int, epoch int) []Layout {
	ls := make([]Layout, len(groups))
	for k, grads := range groups {
		offs := make([]int, len(grads))
		n := 0
		for j, g := range grads {
			offs[j] = n
			n += numel[g]
		}
		ls[k] = Layout{Index: k, Grads: grads, Offsets: offs, Len: n, Epoch: epoch}
	}
	return ls
}
