package native

import (
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/transport"
)

var _ backend.HostLayout = (*Comm)(nil)

// Hosts returns the host index of every rank of c, hosts numbered in
// order of their lowest rank of c: from the endpoint's host identities
// (transport.HostTopology: what GOCOMM_HOST_ID or Options.HostID set, else
// the machine's identity), all 0 over an in-process endpoint (one
// process, one host), and nil over another endpoint that cannot tell.
func (c *Comm) Hosts() []int {
	ht, ok := c.ep.(transport.HostTopology)
	if !ok {
		if _, inproc := c.ep.(*transport.Inproc); inproc {
			return make([]int, c.size)
		}
		return nil
	}
	return hostIndices(c.members, ht.HostOf)
}

// hostIndices numbers the hosts of members (world ranks, whose endpoint
// host is hostOf(w)) in order of first appearance.
func hostIndices(members []int, hostOf func(int) int) []int {
	return backend.NumberHosts(len(members), func(r int) int { return hostOf(members[r]) })
}
