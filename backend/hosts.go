package backend

// HostLayout is implemented by communicators that know which of their
// ranks share a host (comm's SplitByHost, NodeRank and NodeCount).
type HostLayout interface {
	// Hosts returns a new slice with the host index of every rank of the
	// communicator: ranks with equal indices share a host (memory), and
	// hosts are numbered 0, 1, ... in order of their lowest rank. It
	// returns nil when the backend cannot tell. It does not communicate,
	// returns the same on every rank, and is safe for concurrent use.
	Hosts() []int
}

// NumberHosts numbers the hosts of n ranks in order of first appearance:
// rank r is on host NumberHosts(...)[r], where ranks with equal key(r)
// share a host and the host of rank 0 is 0. The HostLayout of every
// backend and comm's hostname fallback number hosts with it.
func NumberHosts[K comparable](n int, key func(r int) K) []int {
	hosts := make([]int, n)
	index := make(map[K]int)
	for r := range n {
		k := key(r)
		h, seen := index[k]
		if !seen {
			h = len(index)
			index[k] = h
		}
		hosts[r] = h
	}
	return hosts
}
