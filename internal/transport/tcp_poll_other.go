//go:build !linux || gocomm_portable

package transport

import (
	"context"
	"io"
	"net"
	"sync/atomic"
)

// pollingReads says whether connection readers poll an empty socket
// (TCPOptions.ReadSpin) before they park. Outside Linux, and in a
// gocomm_portable build, they do not: the raw non-blocking read behind
// polling is Linux's (tcp_poll_linux.go).
const pollingReads = false

// newConnReader returns the reader of a connection's reader goroutine:
// the connection itself, whose reads park in the network poller until
// bytes arrive. spin (TCPOptions.ReadSpin) has no effect here.
func newConnReader(nc net.Conn, spin *atomic.Int64, writing *atomic.Int32) io.Reader { return nc }

// connWriter is the non-blocking first write of a message
// (tcp_poll_linux.go); here there is none, and every message is written
// the blocking way.
type connWriter struct{}

func newConnWriter(net.Conn, *atomic.Int64, *atomic.Int32) *connWriter { return nil }

func (w *connWriter) writeNow(_ context.Context, bufs [][]byte) (int, [][]byte) { return 0, bufs }

// readProbe tells whether a connection has bytes to read
// (tcp_poll_linux.go); here there is none, and TCP.crowd leaves receives
// to park at once.
type readProbe struct{}

func newReadProbe(net.Conn) *readProbe { return nil }

// readable reports true: with no probe, there is no telling.
func (*readProbe) readable() bool { return true }

// crowdedYieldWait is unused here (pollingReads is false).
const crowdedYieldWait = 0

func (c *tcpConn) yieldUntilReadable(context.Context, *recvOp, *atomic.Bool, int64) yieldEnd {
	return yieldTimeout
}
