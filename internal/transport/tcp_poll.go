package transport

import "time"

// defaultReadSpin is TCPOptions.ReadSpin's default: 8-byte one-way
// latency between two processes over loopback, median, 47 us when the
// reader parks at once, 9 us when it polls (BenchmarkSHMProcess). Builds
// without polling reads (pollingReads false) ignore it.
const defaultReadSpin = 200 * time.Microsecond

// yieldEnd is why a crowded host's receive stopped yielding
// (tcpConn.yieldUntilReadable).
type yieldEnd uint8

const (
	yieldDone     yieldEnd = iota // the receive is done
	yieldReadable                 // the peer's bytes are in the socket
	yieldCtx                      // the receive's context ended
	yieldFailed                   // the endpoint failed
	yieldTimeout                  // crowdedYieldWait passed
)
