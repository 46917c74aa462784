//go:build !gocomm_portable

package release

// Store64 stores v at p (8-byte aligned) with release order.
//
//go:noescape
func Store64(p *uint64, v uint64)
