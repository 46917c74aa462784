package algo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var (
	testSizes  = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17}
	testChunks = []int{0, 1, 3}
)

// testCountsFor is the element counts tried for size ranks: zero, one,
// fewer than size (empty blocks), odd, and uneven for most sizes.
func testCountsFor(size int) []int {
	return []int{0, 1, 2, size + 1, 37}
}

// testCountVectors is the per-rank count vectors tried for size ranks.
func testCountVectors(size int) map[string][]int {
	rng := rand.New(rand.NewPCG(uint64(size), 7))
	zeros, ones, random, single, ramp := make([]int, size), make([]int, size), make([]int, size), make([]int, size), make([]int, size)
	for i := range size {
		ones[i] = 1
		random[i] = rng.IntN(6) // 0..5, zeros included
		ramp[i] = i
	}
	single[size/2] = 7
	return map[string][]int{"zeros": zeros, "ones": ones, "random": random, "single": single, "ramp": ramp}
}

// owners maps each element of a blocked layout to the rank of its block.
func owners(counts []int) []int {
	var own []int
	for r, c := range counts {
		for range c {
			own = append(own, r)
		}
	}
	return own
}

func allReduceCase(a Algorithm, size, count, chunk int) cellCase {
	return cellCase{
		size: size, alg: a,
		plan:   func(r int) (Plan, error) { return AllReduce(a, r, size, count, chunk) },
		layout: func(int) int { return count },
		fill: func(r int, w, _ []cell) {
			for e := range count {
				w[e] = orig(e, r)
			}
		},
		check: func(_ int, w []cell) error {
			return expectCells(w, 0, func(e int) cell { return reduced(e, size) }, count)
		},
	}
}

func reduceCase(a Algorithm, size, root, count int) cellCase {
	c := allReduceCase(a, size, count, 0)
	c.plan = func(r int) (Plan, error) { return Reduce(a, r, size, root, count) }
	check := c.check
	c.check = func(r int, w []cell) error {
		if r != root {
			return nil
		}
		return check(r, w)
	}
	return c
}

func broadcastCase(a Algorithm, size, root, count, chunk int) cellCase {
	return cellCase{
		size: size, alg: a,
		plan:   func(r int) (Plan, error) { return Broadcast(a, r, size, root, count, chunk) },
		layout: func(int) int { return count },
		fill: func(r int, w, _ []cell) {
			if r == root {
				for e := range count {
					w[e] = orig(e, root)
				}
			}
		},
		check: func(_ int, w []cell) error {
			return expectCells(w, 0, func(e int) cell { return orig(e, root) }, count)
		},
	}
}

func allGatherCase(a Algorithm, size int, counts []int) cellCase {
	off, own := Offsets(counts), owners(counts)
	return cellCase{
		size: size, alg: a,
		plan:   func(r int) (Plan, error) { return AllGather(a, r, size, counts) },
		layout: func(int) int { return off[size] },
		fill: func(r int, w, _ []cell) {
			for e := off[r]; e < off[r+1]; e++ {
				w[e] = orig(e, r)
			}
		},
		check: func(_ int, w []cell) error {
			return expectCells(w, 0, func(e int) cell { return orig(e, own[e]) }, off[size])
		},
	}
}

func reduceScatterCase(a Algorithm, size int, counts []int) cellCase {
	off := Offsets(counts)
	return cellCase{
		size: size, alg: a,
		plan:   func(r int) (Plan, error) { return ReduceScatter(a, r, size, counts) },
		layout: func(int) int { return off[size] },
		fill: func(r int, w, _ []cell) {
			for e := range off[size] {
				w[e] = orig(e, r)
			}
		},
		check: func(r int, w []cell) error {
			return expectCells(w, off[r], func(e int) cell { return reduced(e, size) }, off[r+1])
		},
	}
}

func gatherCase(a Algorithm, size, root int, counts []int) cellCase {
	c := allGatherCase(a, size, counts)
	c.plan = func(r int) (Plan, error) { return Gather(a, r, size, root, counts) }
	check := c.check
	c.check = func(r int, w []cell) error {
		if r != root {
			return nil
		}
		return check(r, w)
	}
	return c
}

func scatterCase(a Algorithm, size, root int, counts []int) cellCase {
	off := Offsets(counts)
	return cellCase{
		size: size, alg: a,
		plan:   func(r int) (Plan, error) { return Scatter(a, r, size, root, counts) },
		layout: func(int) int { return off[size] },
		fill: func(r int, w, _ []cell) {
			if r == root {
				for e := range off[size] {
					w[e] = orig(e, root)
				}
			}
		},
		check: func(r int, w []cell) error {
			return expectCells(w, off[r], func(e int) cell { return orig(e, root) }, off[r+1])
		},
	}
}

// allToAllCounts derives a consistent all-to-all: rank s sends
// m[s][d] elements to rank d.
func allToAllCase(a Algorithm, size int, m [][]int) cellCase {
	send := func(r int) []int { return m[r] }
	recv := func(r int) []int {
		c := make([]int, size)
		for s := range size {
			c[s] = m[s][r]
		}
		return c
	}
	const stride = 1_000_000 // elem = destination*stride + index within the block
	return cellCase{
		size: size, alg: a,
		plan:     func(r int) (Plan, error) { return AllToAll(a, r, size, send(r), recv(r)) },
		layout:   func(r int) int { return Offsets(recv(r))[size] },
		hasInput: func(r int) int { return Offsets(send(r))[size] },
		fill: func(r int, _, in []cell) {
			off := Offsets(send(r))
			for d := range size {
				for i := range m[r][d] {
					in[off[d]+i] = cell{elem: d*stride + i, mask: 1 << r, n: 1}
				}
			}
		},
		check: func(r int, w []cell) error {
			off := Offsets(recv(r))
			for s := range size {
				for i := range m[s][r] {
					if want := (cell{elem: r*stride + i, mask: 1 << s, n: 1}); w[off[s]+i] != want {
						return fmt.Errorf("element %d of the block from rank %d = %+v, want %+v", i, s, w[off[s]+i], want)
					}
				}
			}
			return nil
		},
	}
}

func allAlgorithms(t *testing.T, op string) []Algorithm {
	t.Helper()
	as := AlgorithmsFor(op)
	if len(as) == 0 {
		t.Fatalf("AlgorithmsFor(%q) is empty", op)
	}
	return as
}

func runCase(t *testing.T, name string, c cellCase) {
	t.Helper()
	if err := c.run(); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestAllReduce(t *testing.T) {
	for _, a := range allAlgorithms(t, "allreduce") {
		for _, size := range testSizes {
			for _, count := range testCountsFor(size) {
				for _, chunk := range testChunks {
					runCase(t, fmt.Sprintf("%v size=%d count=%d chunk=%d", a, size, count, chunk),
						allReduceCase(a, size, count, chunk))
				}
			}
		}
	}
}

func TestReduce(t *testing.T) {
	for _, a := range allAlgorithms(t, "reduce") {
		for _, size := range testSizes {
			for root := range size {
				for _, count := range testCountsFor(size) {
					runCase(t, fmt.Sprintf("%v size=%d root=%d count=%d", a, size, root, count),
						reduceCase(a, size, root, count))
				}
			}
		}
	}
}

func TestBroadcast(t *testing.T) {
	for _, a := range allAlgorithms(t, "broadcast") {
		for _, size := range testSizes {
			for root := range size {
				for _, count := range testCountsFor(size) {
					for _, chunk := range testChunks {
						runCase(t, fmt.Sprintf("%v size=%d root=%d count=%d chunk=%d", a, size, root, count, chunk),
							broadcastCase(a, size, root, count, chunk))
					}
				}
			}
		}
	}
}

func TestAllGather(t *testing.T) {
	for _, a := range allAlgorithms(t, "allgather") {
		for _, size := range testSizes {
			for name, counts := range testCountVectors(size) {
				runCase(t, fmt.Sprintf("%v size=%d counts=%s%v", a, size, name, counts),
					allGatherCase(a, size, counts))
			}
		}
	}
}

func TestReduceScatter(t *testing.T) {
	for _, a := range allAlgorithms(t, "reducescatter") {
		for _, size := range testSizes {
			for name, counts := range testCountVectors(size) {
				runCase(t, fmt.Sprintf("%v size=%d counts=%s%v", a, size, name, counts),
					reduceScatterCase(a, size, counts))
			}
		}
	}
}

func TestGather(t *testing.T) {
	for _, a := range allAlgorithms(t, "gather") {
		for _, size := range testSizes {
			for root := range size {
				for name, counts := range testCountVectors(size) {
					runCase(t, fmt.Sprintf("%v size=%d root=%d counts=%s%v", a, size, root, name, counts),
						gatherCase(a, size, root, counts))
				}
			}
		}
	}
}

func TestScatter(t *testing.T) {
	for _, a := range allAlgorithms(t, "scatter") {
		for _, size := range testSizes {
			for root := range size {
				for name, counts := range testCountVectors(size) {
					runCase(t, fmt.Sprintf("%v size=%d root=%d counts=%s%v", a, size, root, name, counts),
						scatterCase(a, size, root, counts))
				}
			}
		}
	}
}

// testMatrices is the send-count matrices tried for an all-to-all of size.
func testMatrices(size int) map[string][][]int {
	rng := rand.New(rand.NewPCG(uint64(size), 11))
	out := map[string][][]int{}
	for _, name := range []string{"zeros", "ones", "random", "diagonal"} {
		m := make([][]int, size)
		for s := range m {
			m[s] = make([]int, size)
			for d := range m[s] {
				switch name {
				case "ones":
					m[s][d] = 1
				case "random":
					m[s][d] = rng.IntN(5)
				case "diagonal":
					if s == d {
						m[s][d] = 3
					}
				}
			}
		}
		out[name] = m
	}
	return out
}

func TestAllToAll(t *testing.T) {
	for _, a := range allAlgorithms(t, "alltoall") {
		for _, size := range testSizes {
			for name, m := range testMatrices(size) {
				runCase(t, fmt.Sprintf("%v size=%d counts=%s%v", a, size, name, m),
					allToAllCase(a, size, m))
			}
		}
	}
}

// TestBarrier checks that barrier plans carry only zero-length messages,
// that they match, and that no rank can leave before every rank has
// arrived: each message carries the set of ranks its sender has heard from
// (itself included) at the start of the step, and after its plan a rank
// must have heard from everybody.
func TestBarrier(t *testing.T) {
	for _, a := range allAlgorithms(t, "barrier") {
		for _, size := range testSizes {
			plans := make([]Plan, size)
			work := make([][]cell, size)
			layout := make([]int, size)
			for r := range size {
				p, err := Barrier(a, r, size)
				if err != nil {
					t.Fatalf("%v size=%d rank %d: %v", a, size, r, err)
				}
				plans[r] = p
				work[r] = []cell{}
				for _, st := range p.Steps {
					for _, x := range slices.Concat(st.Sends, st.Recvs) {
						if x.Len != 0 || len(st.Copies) != 0 {
							t.Fatalf("%v size=%d rank %d: barrier moves data: %+v", a, size, r, st)
						}
					}
				}
			}
			if err := simulate(plans, work, nil, layout, combineCells); err != nil {
				t.Errorf("%v size=%d: %v", a, size, err)
				continue
			}
			heard := make([]uint64, size)
			steps := 0
			for r := range size {
				heard[r] = 1 << r
				steps = max(steps, len(plans[r].Steps))
			}
			for i := range steps {
				start := append([]uint64(nil), heard...)
				for r, p := range plans {
					if i < len(p.Steps) {
						for _, x := range p.Steps[i].Recvs {
							heard[r] |= start[x.Peer]
						}
					}
				}
			}
			for r := range size {
				if heard[r] != 1<<size-1 {
					t.Errorf("%v size=%d: rank %d leaves having heard only from %b", a, size, r, heard[r])
				}
			}
		}
	}
}

// TestAllReduceSameBits runs every all-reduce in float32 with inputs whose
// sum depends on the order of summation, and checks that every rank ends
// with the same bits.
func TestAllReduceSameBits(t *testing.T) {
	for _, size := range testSizes {
		const count = 13
		inputs := orderSensitiveInputs(size, count)
		if size >= 3 && !orderMatters(inputs) {
			t.Fatalf("size=%d: test inputs sum to the same bits in every order tried; pick others", size)
		}
		for _, a := range allAlgorithms(t, "allreduce") {
			for _, chunk := range testChunks {
				plans := make([]Plan, size)
				for r := range size {
					p, err := AllReduce(a, r, size, count, chunk)
					if err != nil {
						t.Fatal(err)
					}
					plans[r] = p
				}
				if err := sameBits(plans, inputs); err != nil {
					t.Errorf("%v size=%d chunk=%d: %v", a, size, chunk, err)
				}
			}
		}
	}
}

// TestSameBitsHasTeeth shows that sameBits rejects a valid all-reduce
// schedule in which every rank sums all inputs itself, starting with its
// own: correct in exact arithmetic, different bits on different ranks.
func TestSameBitsHasTeeth(t *testing.T) {
	const size, count = 3, 13
	plans := make([]Plan, size)
	for r := range size {
		b := newBuilder(Linear)
		b.copyTo(0, Work, 0, count, count) // keep the input to send from
		for k := 1; k < size; k++ {
			b.send(k-1, mod(r-k, size), Work, count, count)
			b.recv(k-1, (r+k)%size, 0, count, true)
		}
		b.plan.Scratch = count
		plans[r] = b.plan
	}
	err := sameBits(plans, orderSensitiveInputs(size, count))
	if err == nil {
		t.Fatal("sameBits accepted a schedule whose ranks sum in different orders")
	}
	t.Log(err)
}

// orderSensitiveInputs returns float32 inputs for size ranks whose sums
// depend on the order of summation.
func orderSensitiveInputs(size, count int) [][]float32 {
	values := []float32{1e8, 1, -1e8, 3.25, -1, 1e-3, 7e7, -3e7, 0.5, 16777216, 3}
	rng := rand.New(rand.NewPCG(uint64(size), 3))
	inputs := make([][]float32, size)
	for r := range size {
		inputs[r] = make([]float32, count)
		for e := range inputs[r] {
			inputs[r][e] = values[rng.IntN(len(values))]
		}
		// 1e8+1 rounds back to 1e8 in float32: element 0 sums to 0 or 1
		// depending on the order.
		inputs[r][0] = []float32{1e8, 1, -1e8}[r%3]
	}
	return inputs
}

// sameBits simulates the all-reduce plans on float32 inputs with addition
// as the reduction and checks that every rank ends with the same bits.
func sameBits(plans []Plan, inputs [][]float32) error {
	size, count := len(plans), len(inputs[0])
	work := make([][]float32, size)
	layout := make([]int, size)
	for r, p := range plans {
		layout[r] = count
		work[r] = make([]float32, count+p.Scratch)
		copy(work[r], inputs[r])
	}
	if err := simulate(plans, work, nil, layout, func(d, s float32) float32 { return d + s }); err != nil {
		return err
	}
	for r := 1; r < size; r++ {
		for e := range count {
			if math.Float32bits(work[r][e]) != math.Float32bits(work[0][e]) {
				return fmt.Errorf("element %d is %g on rank 0 but %g on rank %d", e, work[0][e], work[r][e], r)
			}
		}
	}
	return nil
}

// orderMatters reports whether summing the inputs of the ranks in rank
// order, starting at different ranks, gives different float32 results for
// some element.
func orderMatters(inputs [][]float32) bool {
	n := len(inputs)
	for e := range inputs[0] {
		sums := map[float32]bool{}
		for start := range n {
			var sum float32
			for i := range n {
				sum += inputs[(start+i)%n][e]
			}
			sums[sum] = true
		}
		if len(sums) > 1 {
			return true
		}
	}
	return false
}

// maxSteps is the length of the longest plan over all ranks.
func maxSteps(plan func(r int) (Plan, error), size int) (int, error) {
	steps := 0
	for r := range size {
		p, err := plan(r)
		if err != nil {
			return 0, err
		}
		steps = max(steps, len(p.Steps))
	}
	return steps, nil
}

// TestStepCounts pins the latency of each schedule: the number of rounds.
func TestStepCounts(t *testing.T) {
	log2 := func(n int) int { return ceilLog2(n) }
	floorLog2 := func(n int) int { return newFold(n).rounds }
	folded := func(n int) int {
		if n&(n-1) == 0 {
			return 0
		}
		return 2
	}
	const count = 1000
	for _, size := range testSizes {
		counts := EvenCounts(count, size)
		cases := []struct {
			name string
			plan func(r int) (Plan, error)
			want int
		}{
			{"allreduce ring", func(r int) (Plan, error) { return AllReduce(Ring, r, size, count, 0) }, 2 * (size - 1)},
			{"allreduce rd", func(r int) (Plan, error) { return AllReduce(RecursiveDoubling, r, size, count, 0) }, floorLog2(size) + folded(size)},
			{"allreduce hd", func(r int) (Plan, error) { return AllReduce(HalvingDoubling, r, size, count, 0) }, 2*floorLog2(size) + folded(size)},
			{"allreduce tree", func(r int) (Plan, error) { return AllReduce(Tree, r, size, count, 0) }, 2 * log2(size)},
			{"allreduce linear", func(r int) (Plan, error) { return AllReduce(Linear, r, size, count, 0) }, min(size-1, 1) * size},
			{"reduce tree", func(r int) (Plan, error) { return Reduce(Tree, r, size, size-1, count) }, log2(size)},
			{"reduce linear", func(r int) (Plan, error) { return Reduce(Linear, r, size, 0, count) }, size - 1},
			{"broadcast tree", func(r int) (Plan, error) { return Broadcast(Tree, r, size, 1%size, count, 0) }, log2(size)},
			{"broadcast ring", func(r int) (Plan, error) { return Broadcast(Ring, r, size, 0, count, 0) }, size - 1},
			{"broadcast ring pipelined", func(r int) (Plan, error) { return Broadcast(Ring, r, size, size/2, count, 100) }, min(size-1, 1) * (10 + size - 2)},
			{"broadcast linear", func(r int) (Plan, error) { return Broadcast(Linear, r, size, 0, count, 7) }, min(size-1, 1)},
			{"allgather ring", func(r int) (Plan, error) { return AllGather(Ring, r, size, counts) }, size - 1},
			{"allgather rd", func(r int) (Plan, error) { return AllGather(RecursiveDoubling, r, size, counts) }, log2(size)},
			{"allgather tree", func(r int) (Plan, error) { return AllGather(Tree, r, size, counts) }, 2 * log2(size)},
			{"reducescatter ring", func(r int) (Plan, error) { return ReduceScatter(Ring, r, size, counts) }, size - 1},
			{"reducescatter hd", func(r int) (Plan, error) { return ReduceScatter(HalvingDoubling, r, size, counts) }, floorLog2(size) + folded(size)},
			{"reducescatter tree", func(r int) (Plan, error) { return ReduceScatter(Tree, r, size, counts) }, 2 * log2(size)},
			{"gather tree", func(r int) (Plan, error) { return Gather(Tree, r, size, 0, counts) }, log2(size)},
			{"gather linear", func(r int) (Plan, error) { return Gather(Linear, r, size, 0, counts) }, min(size-1, 1)},
			{"scatter tree", func(r int) (Plan, error) { return Scatter(Tree, r, size, size-1, counts) }, log2(size)},
			{"scatter linear", func(r int) (Plan, error) { return Scatter(Linear, r, size, 0, counts) }, min(size-1, 1)},
			{"alltoall pairwise", func(r int) (Plan, error) { return AllToAll(Pairwise, r, size, counts, counts) }, max(size-1, 1)},
			{"alltoall linear", func(r int) (Plan, error) { return AllToAll(Linear, r, size, counts, counts) }, 1},
			{"barrier rd", func(r int) (Plan, error) { return Barrier(RecursiveDoubling, r, size) }, log2(size)},
			{"barrier tree", func(r int) (Plan, error) { return Barrier(Tree, r, size) }, 2 * log2(size)},
		}
		for _, c := range cases {
			got, err := maxSteps(c.plan, size)
			if err != nil {
				t.Fatalf("%s size=%d: %v", c.name, size, err)
			}
			if got != c.want {
				t.Errorf("%s size=%d: %d steps, want %d", c.name, size, got, c.want)
			}
		}
	}
}

// TestChunking checks that chunk bounds every all-reduce message and that
// pieces of one message stay in one step.
func TestChunking(t *testing.T) {
	for _, a := range allAlgorithms(t, "allreduce") {
		for _, size := range []int{2, 5, 8} {
			const count, chunk = 100, 7
			whole, err := AllReduce(a, 1, size, count, 0)
			if err != nil {
				t.Fatal(err)
			}
			cut, err := AllReduce(a, 1, size, count, chunk)
			if err != nil {
				t.Fatal(err)
			}
			if len(whole.Steps) != len(cut.Steps) {
				t.Errorf("%v size=%d: chunking changed the step count from %d to %d", a, size, len(whole.Steps), len(cut.Steps))
			}
			for i, st := range cut.Steps {
				elems := func(xs []Xfer) int {
					n := 0
					for _, x := range xs {
						n += x.Len
					}
					return n
				}
				for _, x := range slices.Concat(st.Sends, st.Recvs) {
					if x.Len > chunk {
						t.Errorf("%v size=%d step %d: message of %d elements with chunk %d", a, size, i, x.Len, chunk)
					}
				}
				if elems(st.Sends) != elems(whole.Steps[i].Sends) || elems(st.Recvs) != elems(whole.Steps[i].Recvs) {
					t.Errorf("%v size=%d step %d: chunking moved elements between steps", a, size, i)
				}
			}
		}
	}
}

// TestScratchOnlyWhereDeclared: only recursive-doubling all-reduce needs
// scratch, and only count elements of it.
func TestScratchOnlyWhereDeclared(t *testing.T) {
	for _, size := range testSizes {
		for r := range size {
			p, err := AllReduce(RecursiveDoubling, r, size, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.Scratch != 0 && p.Scratch != 10 {
				t.Errorf("size=%d rank %d: Scratch %d", size, r, p.Scratch)
			}
			for _, a := range []Algorithm{Ring, HalvingDoubling, Tree} {
				p, err := AllReduce(a, r, size, 10, 0)
				if err != nil {
					t.Fatal(err)
				}
				if p.Scratch != 0 {
					t.Errorf("%v size=%d rank %d: Scratch %d", a, size, r, p.Scratch)
				}
			}
		}
	}
}

func TestAlgorithmsFor(t *testing.T) {
	ops := []string{"allreduce", "reduce", "broadcast", "allgather", "reducescatter", "gather", "scatter", "alltoall", "barrier"}
	for _, op := range ops {
		as := AlgorithmsFor(op)
		if len(as) == 0 {
			t.Errorf("AlgorithmsFor(%q) is empty", op)
		}
		for _, a := range as {
			if a == Auto {
				t.Errorf("AlgorithmsFor(%q) lists auto", op)
			}
		}
		as[0] = Auto // callers may keep and modify the result
		if AlgorithmsFor(op)[0] == Auto {
			t.Errorf("AlgorithmsFor(%q) returns shared state", op)
		}
	}
	if as := AlgorithmsFor("allreduce-ish"); as != nil {
		t.Errorf("AlgorithmsFor of an unknown op = %v, want nil", as)
	}
}

func TestParseAlgorithm(t *testing.T) {
	for a := Auto; a <= Linear; a++ {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.String(), got, err)
		}
	}
	for s, want := range map[string]Algorithm{"rd": RecursiveDoubling, "HD": HalvingDoubling, " rabenseifner ": HalvingDoubling, "": Auto} {
		if got, err := ParseAlgorithm(s); err != nil || got != want {
			t.Errorf("ParseAlgorithm(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	if _, err := ParseAlgorithm("bogus"); err == nil {
		t.Error("ParseAlgorithm(bogus) succeeded")
	}
}

// FuzzPlans simulates a random operation, algorithm, size, root and counts
// against the reference.
func FuzzPlans(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(12), uint8(5), uint16(1000), uint8(9), uint64(1))
	f.Add(uint8(4), uint8(1), uint8(22), uint8(0), uint16(3), uint8(0), uint64(2))
	f.Add(uint8(5), uint8(0), uint8(13), uint8(11), uint16(40), uint8(0), uint64(3))
	f.Add(uint8(2), uint8(1), uint8(10), uint8(4), uint16(77), uint8(5), uint64(4))
	ops := []string{"allreduce", "reduce", "broadcast", "allgather", "reducescatter", "gather", "scatter", "alltoall"}
	f.Fuzz(func(t *testing.T, opIdx, algIdx, sizeB, rootB uint8, countW uint16, chunkB uint8, seed uint64) {
		op := ops[int(opIdx)%len(ops)]
		as := AlgorithmsFor(op)
		a := as[int(algIdx)%len(as)]
		size := 1 + int(sizeB)%24
		root := int(rootB) % size
		count, chunk := int(countW)%500, int(chunkB)%16
		rng := rand.New(rand.NewPCG(seed, 5))
		counts := make([]int, size)
		m := make([][]int, size)
		for i := range counts {
			counts[i] = rng.IntN(count/size + 2)
			m[i] = make([]int, size)
			for j := range m[i] {
				m[i][j] = rng.IntN(4)
			}
		}
		var c cellCase
		switch op {
		case "allreduce":
			c = allReduceCase(a, size, count, chunk)
		case "reduce":
			c = reduceCase(a, size, root, count)
		case "broadcast":
			c = broadcastCase(a, size, root, count, chunk)
		case "allgather":
			c = allGatherCase(a, size, counts)
		case "reducescatter":
			c = reduceScatterCase(a, size, counts)
		case "gather":
			c = gatherCase(a, size, root, counts)
		case "scatter":
			c = scatterCase(a, size, root, counts)
		case "alltoall":
			c = allToAllCase(a, size, m)
		}
		if err := c.run(); err != nil {
			t.Fatalf("%s %v size=%d root=%d count=%d chunk=%d counts=%v: %v", op, a, size, root, count, chunk, counts, err)
		}
	})
}

func TestAlgorithmFlagAndMessages(t *testing.T) {
	var a Algorithm
	if err := a.Set("hd"); err != nil || a != HalvingDoubling {
		t.Errorf("Set(hd) = %v, %v", a, err)
	}
	if err := a.Set("nope"); err == nil {
		t.Error("Set(nope) succeeded")
	}
	if s := Buf(7).String(); s != "Buf(7)" {
		t.Errorf("Buf(7).String() = %q", s)
	}
	p, err := AllReduce(Ring, 0, 4, 8, 1) // 6 steps, 2 pieces of one element each
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Messages(); got != 12 {
		t.Errorf("Messages() = %d, want 12", got)
	}
}
