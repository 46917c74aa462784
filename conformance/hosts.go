package conformance

import (
	"context"
	"fmt"
	"slices"

	"github.com/gocomm/comm"
)

// checkHosts: NodeRank, NodeCount and SplitByHost agree with each other on
// every rank (hosts numbered by their lowest rank; the host's communicator
// is the ranks of this rank's host, in order), whatever the hosts are.
func checkHosts(ctx context.Context, c *comm.Comm) error {
	h, err := c.SplitByHost(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	nr, nc := c.NodeRank(), c.NodeCount()
	all := make([]int64, c.Size())
	if err := comm.AllGather(ctx, c, []int64{int64(nr)}, all); err != nil {
		return err
	}
	me, _ := c.GlobalRank(c.Rank())
	if nr < 0 {
		// The backend cannot tell hosts apart: nor can any rank, and
		// SplitByHost still holds this rank.
		if nc != 0 || slices.Max(all) >= 0 || !slices.Contains(h.Ranks(), me) {
			return fmt.Errorf("no host layout: NodeCount %d, node ranks %v, host communicator %v", nc, all, h.Ranks())
		}
		return nil
	}
	var mates []int
	top := int64(-1)
	for r, n := range all {
		if n < 0 || n > top+1 {
			return fmt.Errorf("node ranks %v: hosts are not numbered by their lowest rank", all)
		}
		top = max(top, n)
		if n == int64(nr) {
			g, _ := c.GlobalRank(r)
			mates = append(mates, g)
		}
	}
	switch {
	case int64(nc) != top+1:
		return fmt.Errorf("NodeCount %d, but the node ranks are %v", nc, all)
	case !slices.Equal(h.Ranks(), mates):
		return fmt.Errorf("SplitByHost: world ranks %v, want those of node %d: %v", h.Ranks(), nr, mates)
	case h.NodeCount() != 1 || h.NodeRank() != 0:
		return fmt.Errorf("the host's communicator spans %d hosts (node rank %d)", h.NodeCount(), h.NodeRank())
	}
	return nil
}
