package algo

import (
	"fmt"

	"github.com/gocomm/comm/core"
)

// Algorithm names a family of schedules (core's, so that the wire and the
// profiler can name them without importing this package).
type Algorithm = core.Algorithm

// Algorithms. Auto lets the caller's cost model choose; Hierarchical is
// composed by the engine, not planned here (plan functions refuse it).
const (
	Auto              = core.Auto
	Ring              = core.Ring
	RecursiveDoubling = core.RecursiveDoubling
	HalvingDoubling   = core.HalvingDoubling
	Tree              = core.Tree
	Pairwise          = core.Pairwise
	Linear            = core.Linear
	Hierarchical      = core.Hierarchical
	SharedBoard       = core.SharedBoard
	SharedStage       = core.SharedStage
	SharedDirect      = core.SharedDirect
)

// ParseAlgorithm is the inverse of Algorithm.String; it also accepts "rd"
// and "hd".
func ParseAlgorithm(s string) (Algorithm, error) { return core.ParseAlgorithm(s) }

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
