package transport

import "time"

// defaultReadSpin is TCPOptions.ReadSpin's default: it trades a core's
// idle time for small messages' latency, which polling cuts several times
// against a reader that parks at once (BenchmarkSHMProcess; see
// docs/tuning.md). Builds without polling reads (pollingReads false)
// ignore it.
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
