package algo

import (
	"fmt"
	"strings"
)

// Algorithm names a family of schedules. Its numbering is stable (it appears
// in profiles and traces).
type Algorithm uint8

// Algorithms. Auto lets the caller's cost model choose.
const (
	Auto Algorithm = iota
	Ring
	RecursiveDoubling
	HalvingDoubling
	Tree
	Pairwise
	Linear
	// Hierarchical is not a plan of this package: the engine composes it
	// from plans on sub-communicators (inside each host, then between one
	// leader per host, then inside each host again). Plan functions refuse
	// it.
	Hierarchical
)

var algorithmNames = [...]string{
	Auto: "auto", Ring: "ring", RecursiveDoubling: "recursive-doubling",
	HalvingDoubling: "halving-doubling", Tree: "tree", Pairwise: "pairwise", Linear: "linear",
	Hierarchical: "hierarchical",
}

func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm is the inverse of String; it also accepts "rd" and "hd".
func ParseAlgorithm(s string) (Algorithm, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "", "auto":
		return Auto, nil
	case "rd":
		return RecursiveDoubling, nil
	case "hd", "rabenseifner":
		return HalvingDoubling, nil
	}
	for i, n := range algorithmNames {
		if n == s {
			return Algorithm(i), nil
		}
	}
	return Auto, fmt.Errorf("algo: unknown algorithm %q (want one of auto, ring, recursive-doubling, halving-doubling, tree, pairwise, linear, hierarchical)", s)
}

// Set implements flag.Value.
func (a *Algorithm) Set(s string) error {
	v, err := ParseAlgorithm(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Buf names one of the two buffers a plan works on.
type Buf uint8

const (
	// Work is the buffer that holds the result. For reductions the engine
	// first copies the caller's input into it; see each plan function for
	// its layout and what it holds before and after.
	Work Buf = iota
	// Input is the caller's input, read only. Only AllToAll plans use it.
	Input
)

func (b Buf) String() string {
	switch b {
	case Work:
		return "work"
	case Input:
		return "input"
	}
	return fmt.Sprintf("Buf(%d)", uint8(b))
}

// Xfer is one message of a step: a send of Buf[Off:Off+Len] to Peer, or a
// receive from Peer into Work[Off:Off+Len]. Offsets and lengths count
// elements, not bytes. A zero Len is a pure synchronisation message.
type Xfer struct {
	Peer   int  // communicator rank of the other side; never the caller's own
	Buf    Buf  // sends read Work or Input; receives always write Work
	Off    int  // first element
	Len    int  // element count
	Reduce bool // receives only: combine into Work with the reduction op instead of overwriting
}

// Copy is a local copy of Len elements from From[FromOff:] to Work[ToOff:].
type Copy struct {
	From    Buf
	FromOff int
	ToOff   int
	Len     int
}

// Step is one round of a schedule. The engine runs a step as: all Copies in
// order, then every receive posted and every send started at once; the step
// ends when all of them have completed.
//
// Rules every plan obeys (and the tests check):
//   - the j-th send to peer p in step i of rank r matches the j-th receive
//     from r in step i of rank p, with the same Len;
//   - within a step no receive writes an element that a send of the same
//     step reads, and no two receives write the same element;
//   - steps are numbered the same on every rank (a rank with nothing to do in
//     a round has an empty step there, or the plan ends early).
type Step struct {
	Copies []Copy
	Sends  []Xfer
	Recvs  []Xfer
}

// Plan is one rank's schedule for one collective.
type Plan struct {
	Algorithm Algorithm
	Steps     []Step
	// Scratch is the number of elements the plan uses in Work beyond the
	// layout of its operation: the engine must provide a Work buffer of at
	// least layout+Scratch elements. No Xfer or Copy range straddles the end
	// of the layout, so an engine may also keep the scratch elements in a
	// separate allocation and map offsets >= layout to it. Only
	// RecursiveDoubling all-reduce plans use scratch (Scratch == count): a
	// full-vector exchange needs a copy to send from while the partner's
	// vector is reduced into the result.
	Scratch int
}

// Messages counts the sends of the plan.
func (p Plan) Messages() int {
	n := 0
	for _, s := range p.Steps {
		n += len(s.Sends)
	}
	return n
}

// Offsets returns the prefix sums of counts: the offset of block i is
// Offsets(counts)[i], and the total is the last element.
func Offsets(counts []int) []int {
	off := make([]int, len(counts)+1)
	for i, c := range counts {
		off[i+1] = off[i] + c
	}
	return off
}

// EvenCounts splits count elements into size blocks whose lengths differ by
// at most one, larger blocks first.
func EvenCounts(count, size int) []int {
	c := make([]int, size)
	for i := range c {
		c[i] = count / size
		if i < count%size {
			c[i]++
		}
	}
	return c
}
