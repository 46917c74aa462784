package backend

import (
	"encoding/binary"
)

// GroupID derives a group's communicator id from its parent's id, the
// sequence number of the call that made it, and a discriminator (the color
// of a Split). Every member computes the same id.
func GroupID(parent, seq uint64, disc int64) uint64 {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], parent)
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(disc))
	// FNV-1a, 64 bit.
	h := uint64(14695981039346656037)
	for _, x := range b {
		h ^= uint64(x)
		h *= 1099511628211
	}
	if h <= 1 { // 1 is the world's id
		h += 2
	}
	return h
}
