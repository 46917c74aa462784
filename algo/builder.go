package algo

// builder accumulates one rank's plan. Steps are addressed by their global
// index, the same on every rank; steps are created on first use, so a plan
// never ends with empty steps but may hold empty steps in between.
type builder struct {
	plan Plan
	// keepEmpty emits zero-length messages (barriers, all-to-all). Otherwise
	// they are left out: both sides derive the length from the same
	// arguments, so both leave the message out.
	keepEmpty bool
	// chunk > 0 cuts every message into pieces of at most chunk elements,
	// sent in order within the same step.
	chunk int
}

func newBuilder(a Algorithm) *builder { return &builder{plan: Plan{Algorithm: a}} }

func (b *builder) step(i int) *Step {
	for len(b.plan.Steps) <= i {
		b.plan.Steps = append(b.plan.Steps, Step{})
	}
	return &b.plan.Steps[i]
}

// pieces calls fn for the pieces [off, off+n) is cut into.
func (b *builder) pieces(off, n int, fn func(off, n int)) {
	if b.chunk <= 0 || n <= b.chunk {
		fn(off, n)
		return
	}
	for p := 0; p < n; p += b.chunk {
		fn(off+p, min(b.chunk, n-p))
	}
}

// send sends buf[off:off+n] to peer in step i.
func (b *builder) send(i, peer int, buf Buf, off, n int) {
	if n == 0 && !b.keepEmpty {
		return
	}
	st := b.step(i)
	b.pieces(off, n, func(off, n int) {
		st.Sends = append(st.Sends, Xfer{Peer: peer, Buf: buf, Off: off, Len: n})
	})
}

// recv receives Work[off:off+n] from peer in step i, reducing if reduce.
func (b *builder) recv(i, peer int, off, n int, reduce bool) {
	if n == 0 && !b.keepEmpty {
		return
	}
	st := b.step(i)
	b.pieces(off, n, func(off, n int) {
		st.Recvs = append(st.Recvs, Xfer{Peer: peer, Buf: Work, Off: off, Len: n, Reduce: reduce})
	})
}

// copyTo copies n elements from from[fromOff:] to Work[toOff:] at the start
// of step i.
func (b *builder) copyTo(i int, from Buf, fromOff, toOff, n int) {
	if n == 0 {
		return
	}
	st := b.step(i)
	st.Copies = append(st.Copies, Copy{From: from, FromOff: fromOff, ToOff: toOff, Len: n})
}

// blocks sends (or receives) the blocks of the ranks root+lo .. root+hi-1
// (mod n), laid out by rank at off, as one message, or two when the ranks
// wrap around the end of the buffer.
func (b *builder) blocks(i, peer int, send bool, lo, hi, root, n int, off []int) {
	if hi <= lo {
		return
	}
	first := (lo + root) % n
	last := first + hi - lo // exclusive, may pass n
	xfer := func(from, to int) {
		if send {
			b.send(i, peer, Work, off[from], off[to]-off[from])
		} else {
			b.recv(i, peer, off[from], off[to]-off[from], false)
		}
	}
	if last <= n {
		xfer(first, last)
		return
	}
	xfer(first, n)
	xfer(0, last-n)
}

// mod is the non-negative remainder of a by n.
func mod(a, n int) int { return ((a % n) + n) % n }

// ceilLog2 is the smallest l with 1<<l >= n, for n >= 1: the number of
// rounds of a binomial tree or of a dissemination over n ranks.
func ceilLog2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}

// treeUp walks the ceilLog2(n) rounds of a binomial tree towards relative
// rank 0 as relative rank v sees them. In round k (m = 1<<k) a rank whose
// lowest set bit is m hands its subtree, relative ranks [v, v+m) ∩ [0, n),
// to its parent v-m and is done; a rank divisible by 2m takes over the
// subtree of its child v+m, if that exists. Subtrees are contiguous in
// relative ranks, which keeps gathers to at most two messages per round.
func treeUp(v, n int, visit func(round, peer, m int, toParent bool)) {
	for k, m := 0, 1; m < n; k, m = k+1, m<<1 {
		switch low := v & (2*m - 1); {
		case low == m:
			visit(k, v-m, m, true)
			return
		case low == 0 && v+m < n:
			visit(k, v+m, m, false)
		}
	}
}

// treeDown walks the same tree from relative rank 0 down, in ceilLog2(n)
// rounds: in round k (m = 1<<(L-1-k)) a rank divisible by 2m hands the
// subtree [v+m, v+2m) ∩ [0, n) to child v+m, and a rank whose lowest set
// bit is m receives its subtree [v, v+m) ∩ [0, n) from v-m.
func treeDown(v, n int, visit func(round, peer, m int, fromParent bool)) {
	l := ceilLog2(n)
	for k := 0; k < l; k++ {
		m := 1 << (l - 1 - k)
		switch low := v & (2*m - 1); {
		case low == m:
			visit(k, v-m, m, true)
		case low == 0 && v+m < n:
			visit(k, v+m, m, false)
		}
	}
}

// fold pairs the ranks of a group whose size is not a power of two: the
// first rem odd ranks (1, 3, ..., 2*rem-1) are extras that hand their data
// to the even rank before them, leaving a core of p (a power of two) ranks
// numbered 0..p-1. Core rank c < rem is actual rank 2c and stands for the
// blocks 2c and 2c+1; core rank c >= rem is actual rank c+rem. So a range of
// core ranks always stands for a contiguous range of actual ranks.
type fold struct {
	p, rem, rounds int // rounds = log2(p)
}

func newFold(n int) fold {
	f := fold{p: 1}
	for f.p*2 <= n {
		f.p *= 2
		f.rounds++
	}
	f.rem = n - f.p
	return f
}

// core returns the core rank of actual rank r, or -1 for an extra.
func (f fold) core(r int) int {
	if r < 2*f.rem {
		if r%2 == 1 {
			return -1
		}
		return r / 2
	}
	return r - f.rem
}

// rank returns the actual rank of core rank c.
func (f fold) rank(c int) int {
	if c < f.rem {
		return 2 * c
	}
	return c + f.rem
}

// hasExtra reports whether core rank c stands for an extra rank too.
func (f fold) hasExtra(c int) bool { return c < f.rem }

// base is the first step after the fold-in step (if any).
func (f fold) base() int {
	if f.rem > 0 {
		return 1
	}
	return 0
}
