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
