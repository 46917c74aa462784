package comm

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"

	"github.com/gocomm/comm/backend"
)

// Hosts. Ranks share a host when the backend says they share memory: on
// the native backend, equal host identities (GOCOMM_HOST_ID or
// Options.HostID when set, else the machine's hostname and boot id); one
// process is one host. Hosts are numbered 0, 1, ... in order of their
// lowest rank of the communicator asked.

// SplitByHost returns the communicator of the ranks of c that share this
// rank's host, in c's rank order, like MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED. Every rank of c must call it (it is a collective:
// a Split). On a backend that cannot tell hosts apart (backend.HostLayout)
// the ranks compare their hostnames instead.
func (c *Comm) SplitByHost(ctx context.Context) (*Comm, error) {
	if err := c.usable("SplitByHost"); err != nil {
		return nil, err
	}
	hosts := c.hostLayout()
	if hosts == nil {
		var err error
		if hosts, err = c.hostsByName(ctx); err != nil {
			return nil, err
		}
	}
	return c.Split(ctx, hosts[c.rank], c.rank)
}

// NodeRank is the index of this rank's host among the hosts of c's ranks
// (0 for the host of rank 0; the next host met in rank order is 1, and so
// on), or -1 when the backend cannot tell hosts apart, or this rank is not
// a member. It does not communicate; safe for concurrent use.
func (c *Comm) NodeRank() int {
	hosts := c.hostLayout()
	if hosts == nil || c.rank < 0 {
		return -1
	}
	return hosts[c.rank]
}

// NodeCount is the number of hosts c's ranks run on, or 0 when the
// backend cannot tell hosts apart, or this rank is not a member. It does
// not communicate; safe for concurrent use.
func (c *Comm) NodeCount() int {
	n := 0
	for _, h := range c.hostLayout() {
		n = max(n, h+1)
	}
	return n
}

// hostLayout is the backend's host index of every rank of c, or nil.
func (c *Comm) hostLayout() []int {
	if c == nil {
		return nil
	}
	hl, ok := c.be.(backend.HostLayout)
	if !ok {
		return nil
	}
	hosts := hl.Hosts()
	if len(hosts) != c.size {
		return nil
	}
	return hosts
}

// hostsByName numbers the hosts of c's ranks by hostname, all-gathered.
func (c *Comm) hostsByName(ctx context.Context) ([]int, error) {
	name, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("comm: SplitByHost: this backend does not know the hosts and the hostname is unknown: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	all := make([]uint64, c.size)
	if err := AllGather(ctx, c, []uint64{h.Sum64()}, all); err != nil {
		return nil, err
	}
	return backend.NumberHosts(c.size, func(r int) uint64 { return all[r] }), nil
}
