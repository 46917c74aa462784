package backend

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// BarrierError is the error of a MonitoredBarrier that some ranks did not
// reach in time.
type BarrierError struct {
	Late    []int // communicator ranks that had not arrived (with WaitAll: all of them; else the first)
	Timeout time.Duration
}

// ErrBarrierTimeout is matched by every *BarrierError.
var ErrBarrierTimeout = errors.New("comm: monitored barrier timed out")

func (e *BarrierError) Error() string {
	s := make([]string, len(e.Late))
	for i, r := range e.Late {
		s[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("comm: rank(s) %s failed to pass MonitoredBarrier within %v", strings.Join(s, ", "), e.Timeout)
}

func (e *BarrierError) Unwrap() error { return ErrBarrierTimeout }

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
