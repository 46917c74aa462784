//go:build !linux || gocomm_portable

package transport

import (
	"time"
)

// shmSupported says whether this build has shared-memory rings. Outside
// Linux (no futexes, no process_vm_readv), and in a gocomm_portable build,
// it has not: every peer is reached over TCP.
const shmSupported = false

func futexWait(addr *uint32, val uint32, d time.Duration)     { time.Sleep(min(d, 50*time.Microsecond)) }
func futexWake(addr *uint32)                                  {}
func futexWaitHeld(addr *uint32, val uint32, d time.Duration) { futexWait(addr, val, d) }
func osYield()                                                {}
func systemCallCost() time.Duration                           { return 0 }

func createSegment(dir, name string, size int) ([]byte, string, error) { return nil, "", errNoSHMHere }
func openSegment(path string, size int) ([]byte, error)                { return nil, errNoSHMHere }
func unmapSegment(mem []byte) error                                    { return nil }
func prefault(ring []byte)                                             {}

func readPeer(pid int, addr uint64, dst []byte) error { return errNoSHMHere }
