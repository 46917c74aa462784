//go:build !amd64 || gocomm_portable

package release

import "sync/atomic"

// Store64 stores v at p (8-byte aligned) with release order (here a
// sequentially consistent atomic store).
func Store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
