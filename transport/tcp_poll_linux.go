//go:build linux && !gocomm_portable

package transport

import (
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"

	"github.com/gocomm/comm/internal/clock"
)

// pollingReads says whether connection readers poll an empty socket
// (TCPOptions.ReadSpin) before they park: here they do.
const pollingReads = true

// pollingReader reads a TCP connection the way a latency-bound receiver
// wants it read: a read that finds nothing keeps trying for spin (read
// at each attempt, so that it can change) before it parks in the network
// poller, whose wake-up (an idle CPU woken by the kernel) costs tens of
// microseconds on a VM. After its first empty read it yields its P once,
// so that a receive it just completed runs at once instead of waiting for
// another thread to be woken; later attempts do not (only every 64th, with
// a single P): each runtime.Gosched wakes an idle thread to look for
// work, which on a machine with as many ranks as cores competes with the
// peer whose message is awaited.
type pollingReader struct {
	rc   syscall.RawConn
	spin *atomic.Int64 // nanoseconds
}

// newConnReader returns the reader of a connection's reader goroutine:
// a pollingReader where the connection exposes its descriptor.
func newConnReader(nc net.Conn, spin *atomic.Int64) io.Reader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	return &pollingReader{rc: rc, spin: spin}
}

func (r *pollingReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	var start int64
	rerr := r.rc.Read(func(fd uintptr) bool {
		for i := 0; ; i++ {
			n, err = syscall.Read(int(fd), p)
			if err != syscall.EAGAIN {
				return true
			}
			if i == 0 {
				start = clock.Nanos()
			} else if clock.Nanos()-start > r.spin.Load() {
				return false
			}
			if i == 0 || (i&63 == 0 && runtime.GOMAXPROCS(0) == 1) {
				// A receive this reader just completed waits for the P.
				runtime.Gosched()
			}
		}
	})
	if rerr != nil {
		return 0, rerr
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}
