package algo

import (
	"errors"
	"strings"
	"testing"
)

func TestErrors(t *testing.T) {
	three := []int{1, 2, 3}
	cases := []struct {
		name string
		call func() (Plan, error)
		is   error
		want string // in the message
	}{
		{"auto", func() (Plan, error) { return AllReduce(Auto, 0, 2, 4, 0) }, ErrUnsupported, "auto must be resolved"},
		{"allreduce pairwise", func() (Plan, error) { return AllReduce(Pairwise, 0, 2, 4, 0) }, ErrUnsupported, "allreduce has no pairwise schedule (want one of ring, recursive-doubling, halving-doubling, tree, linear)"},
		{"unknown algorithm", func() (Plan, error) { return Barrier(Algorithm(99), 0, 2) }, ErrUnsupported, "Algorithm(99)"},
		{"reduce ring", func() (Plan, error) { return Reduce(Ring, 0, 2, 0, 4) }, ErrUnsupported, "reduce has no ring"},
		{"broadcast rd", func() (Plan, error) { return Broadcast(RecursiveDoubling, 0, 2, 0, 4, 0) }, ErrUnsupported, "broadcast has no"},
		{"allgather hd", func() (Plan, error) { return AllGather(HalvingDoubling, 0, 3, three) }, ErrUnsupported, "allgather has no"},
		{"reducescatter rd", func() (Plan, error) { return ReduceScatter(RecursiveDoubling, 0, 3, three) }, ErrUnsupported, "reducescatter has no"},
		{"gather ring", func() (Plan, error) { return Gather(Ring, 0, 3, 0, three) }, ErrUnsupported, "gather has no"},
		{"scatter pairwise", func() (Plan, error) { return Scatter(Pairwise, 0, 3, 0, three) }, ErrUnsupported, "scatter has no"},
		{"alltoall ring", func() (Plan, error) { return AllToAll(Ring, 0, 3, three, three) }, ErrUnsupported, "alltoall has no"},
		{"barrier linear", func() (Plan, error) { return Barrier(Linear, 0, 3) }, ErrUnsupported, "barrier has no"},
		{"size 0", func() (Plan, error) { return AllReduce(Ring, 0, 0, 4, 0) }, ErrInvalid, "size 0, want at least 1"},
		{"negative size", func() (Plan, error) { return Barrier(Tree, 0, -2) }, ErrInvalid, "size -2"},
		{"rank too big", func() (Plan, error) { return AllReduce(Ring, 2, 2, 4, 0) }, ErrInvalid, "rank 2 out of range [0, 2)"},
		{"negative rank", func() (Plan, error) { return Gather(Tree, -1, 3, 0, three) }, ErrInvalid, "rank -1 out of range"},
		{"root too big", func() (Plan, error) { return Reduce(Tree, 0, 2, 2, 4) }, ErrInvalid, "root 2 out of range [0, 2)"},
		{"negative root", func() (Plan, error) { return Broadcast(Tree, 0, 2, -1, 4, 0) }, ErrInvalid, "root -1 out of range"},
		{"scatter root", func() (Plan, error) { return Scatter(Linear, 0, 3, 3, three) }, ErrInvalid, "root 3"},
		{"gather root", func() (Plan, error) { return Gather(Linear, 0, 3, 5, three) }, ErrInvalid, "root 5"},
		{"negative count", func() (Plan, error) { return AllReduce(Tree, 0, 2, -4, 0) }, ErrInvalid, "negative count -4"},
		{"negative reduce count", func() (Plan, error) { return Reduce(Linear, 0, 2, 0, -1) }, ErrInvalid, "negative count"},
		{"negative broadcast count", func() (Plan, error) { return Broadcast(Ring, 0, 2, 0, -1, 0) }, ErrInvalid, "negative count"},
		{"negative chunk", func() (Plan, error) { return AllReduce(Ring, 0, 2, 4, -1) }, ErrInvalid, "negative chunk -1 (0 means no chunking)"},
		{"negative broadcast chunk", func() (Plan, error) { return Broadcast(Ring, 0, 2, 0, 4, -3) }, ErrInvalid, "negative chunk"},
		{"short counts", func() (Plan, error) { return AllGather(Ring, 0, 4, three) }, ErrInvalid, "len(counts) = 3, want size 4"},
		{"long counts", func() (Plan, error) { return ReduceScatter(Tree, 0, 2, three) }, ErrInvalid, "len(counts) = 3, want size 2"},
		{"nil counts", func() (Plan, error) { return Gather(Tree, 0, 2, 0, nil) }, ErrInvalid, "len(counts) = 0"},
		{"negative block", func() (Plan, error) { return Scatter(Tree, 0, 3, 0, []int{1, -2, 3}) }, ErrInvalid, "counts[1] = -2 is negative"},
		{"alltoall send counts", func() (Plan, error) { return AllToAll(Pairwise, 0, 2, three, three[:2]) }, ErrInvalid, "len(sendCounts) = 3"},
		{"alltoall recv counts", func() (Plan, error) { return AllToAll(Pairwise, 0, 2, three[:2], []int{1, -1}) }, ErrInvalid, "recvCounts[1] = -1"},
		{"alltoall own block", func() (Plan, error) { return AllToAll(Linear, 1, 2, []int{1, 2}, []int{1, 3}) }, ErrInvalid, "rank 1 sends itself 2 elements"},
	}
	for _, c := range cases {
		p, err := c.call()
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case !errors.Is(err, c.is):
			t.Errorf("%s: error %q is not %v", c.name, err, c.is)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %q does not say %q", c.name, err, c.want)
		case len(p.Steps) != 0:
			t.Errorf("%s: error with a non-empty plan", c.name)
		}
	}
}
