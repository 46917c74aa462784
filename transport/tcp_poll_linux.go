//go:build linux && !gocomm_portable

package transport

import (
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

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
// so that a receive it completed runs at once instead of waiting for
// another thread to be woken (readFrames yields already, without this
// read, after a message when nothing more is buffered; this yield serves
// the receives completed from buffered frames); later attempts do not (only every 64th, with
// a single P): each runtime.Gosched wakes an idle thread to look for
// work, which on a machine with as many ranks as cores competes with the
// peer whose message is awaited.
type pollingReader struct {
	rc   syscall.RawConn
	spin *atomic.Int64 // nanoseconds
	// The state of one Read, kept here (the reader goroutine's alone) so
	// that the function handed to rc.Read is made once, not per read.
	p     []byte
	n     int
	err   error
	poll  func(fd uintptr) bool
	start int64
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
	r := &pollingReader{rc: rc, spin: spin}
	r.poll = r.readFd
	return r
}

func (r *pollingReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p = p
	rerr := r.rc.Read(r.poll)
	n, err := r.n, r.err
	r.p, r.err = nil, nil
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

// readFd is one Read's attempts on the descriptor: it reports false (park
// until readable) once spin has passed with nothing to read.
func (r *pollingReader) readFd(fd uintptr) bool {
	for i := 0; ; i++ {
		r.n, r.err = syscall.Read(int(fd), r.p)
		if r.err != syscall.EAGAIN {
			return true
		}
		if i == 0 {
			r.start = clock.Nanos()
		} else if clock.Nanos()-r.start > r.spin.Load() {
			return false
		}
		if i == 0 || (i&63 == 0 && runtime.GOMAXPROCS(0) == 1) {
			// A receive this reader just completed waits for the P.
			runtime.Gosched()
		}
	}
}

// connWriter writes a message's buffers to a connection in one
// non-blocking writev when the socket takes them at once, the common case
// for small messages: no timer, no goroutine, no allocation. Used under
// the connection's write lock only.
type connWriter struct {
	rc    syscall.RawConn
	iov   []syscall.Iovec
	n     int
	err   error
	write func(fd uintptr) bool
}

func newConnWriter(nc net.Conn) *connWriter {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &connWriter{rc: rc}
	w.write = w.writeFd
	return w
}

// tryWrite writes as much of bufs as the socket takes without blocking
// and returns how many bytes that was (0 when it takes none, or when w is
// nil).
func (w *connWriter) tryWrite(bufs [][]byte) int {
	if w == nil || len(bufs) == 0 || len(bufs) > 1024 {
		return 0
	}
	w.iov = w.iov[:0]
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		v := syscall.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		w.iov = append(w.iov, v)
	}
	if len(w.iov) == 0 {
		return 0
	}
	w.n, w.err = 0, nil
	if err := w.rc.Write(w.write); err != nil {
		w.n = 0
	}
	n := w.n
	clear(w.iov) // keep no caller's buffer reachable
	if w.err != nil || n < 0 {
		return 0
	}
	return n
}

func (w *connWriter) writeFd(fd uintptr) bool {
	r, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(len(w.iov)))
	if e != 0 {
		w.err = e
		return true // EAGAIN included: the caller writes the rest the blocking way
	}
	w.n = int(r)
	return true
}
