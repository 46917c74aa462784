//go:build !linux || gocomm_portable

package transport

import (
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
func newConnReader(nc net.Conn, spin *atomic.Int64) io.Reader { return nc }

// connWriter is the non-blocking first write of a message
// (tcp_poll_linux.go); here there is none, and every message is written
// the blocking way.
type connWriter struct{}

func newConnWriter(net.Conn) *connWriter { return nil }

func (w *connWriter) tryWrite([][]byte) int { return 0 }
