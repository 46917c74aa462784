//go:build linux && !gocomm_portable

package transport

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gocomm/comm/internal/clock"
)

// pollingReads says whether connection readers poll an empty socket
// (TCPOptions.ReadSpin) before they park: here they do.
const pollingReads = true

// pollingReader reads a TCP connection the way a latency-bound receiver
// wants it read: a read that finds nothing keeps trying for spin (read
// at each attempt, so that it can change) before it parks in the network
// poller, whose wake-up (an idle CPU woken by the kernel) costs many
// times a small message's latency. After its first empty read it yields its P once,
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
	// writing counts the endpoint's writes that wait for room in a socket
	// (connWriter.waitRoom): while one does, the reader yields its P at
	// every empty read, so that the writer retries in turn.
	writing *atomic.Int32
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
func newConnReader(nc net.Conn, spin *atomic.Int64, writing *atomic.Int32) io.Reader {
	rc := rawConnOf(nc)
	if rc == nil {
		return nc
	}
	r := &pollingReader{rc: rc, spin: spin, writing: writing}
	r.poll = r.readFd
	return r
}

// rawConnOf returns nc's descriptor access, or nil if it has none.
func rawConnOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
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
		r.n, r.err = rawRead(fd, r.p)
		if r.err != syscall.EAGAIN {
			return true
		}
		if i == 0 {
			r.start = clock.Nanos()
		} else if clock.Nanos()-r.start > r.spin.Load() {
			return false
		}
		if i == 0 || (i&63 == 0 && runtime.GOMAXPROCS(0) == 1) || r.writing.Load() > 0 {
			// A receive this reader just completed, or a write
			// waiting for room (connWriter.waitRoom), waits for the P.
			runtime.Gosched()
		}
	}
}

// connWriter writes a message's buffers to a connection in one
// non-blocking writev when the socket takes them at once, the common case
// for small messages: no timer, no goroutine, no allocation. Used under
// the connection's write lock only.
type connWriter struct {
	rc      syscall.RawConn
	spin    *atomic.Int64 // TCPOptions.ReadSpin, nanoseconds: how long waitRoom waits for room
	writing *atomic.Int32 // the endpoint's writes in waitRoom
	iov     []syscall.Iovec
	n       int
	err     error
	write   func(fd uintptr) bool
}

func newConnWriter(nc net.Conn, spin *atomic.Int64, writing *atomic.Int32) *connWriter {
	rc := rawConnOf(nc)
	if rc == nil {
		return nil
	}
	w := &connWriter{rc: rc, spin: spin, writing: writing}
	w.write = w.writeFd
	return w
}

// writeNow writes what it can of bufs without parking: one non-blocking
// writev, the common case for small messages (no timer, no goroutine, no
// allocation), then, if the socket is full, waitRoom. It returns how many
// bytes it wrote and what is left of bufs (whose array and first slice it
// shortens in place, as dropFront), for the caller to write the blocking
// way.
func (w *connWriter) writeNow(ctx context.Context, bufs [][]byte) (int, [][]byte) {
	if w == nil || len(bufs) == 0 {
		return 0, bufs
	}
	n, err := w.writeSome(bufs)
	bufs = dropFront(bufs, n)
	if len(bufs) == 0 || (err != nil && err != syscall.EAGAIN) {
		return n, bufs // done, or the blocking write reports the error
	}
	more, bufs := w.waitRoom(ctx, bufs)
	return n + more, bufs
}

// waitRoom writes bufs as the peer makes room in the socket, retrying
// non-blocking writes and yielding the P between tries, for as long as
// the socket takes bytes at least every spin. A write that parks in the
// network poller instead is woken only when the runtime polls the
// network, which a P never does while a goroutine is runnable: with one
// P per rank (GOCOMM_BIND=auto) the connection's polling reader kept it
// runnable, and a message larger than the socket's buffer could wait up
// to the reader's ReadSpin per refill, which slowed large collectives
// over TCP. Messages the socket takes at once (up to a few MiB on
// loopback) never come here.
func (w *connWriter) waitRoom(ctx context.Context, bufs [][]byte) (int, [][]byte) {
	spin := w.spin.Load()
	if spin <= 0 {
		return 0, bufs // a crowded host (TCP.crowd): park at once
	}
	w.writing.Add(1)
	defer w.writing.Add(-1)
	n := 0
	for last := clock.Nanos(); len(bufs) > 0 && ctx.Err() == nil && clock.Nanos()-last <= spin; {
		runtime.Gosched()
		k, err := w.writeSome(bufs)
		if k > 0 {
			n += k
			bufs = dropFront(bufs, k)
			last = clock.Nanos()
		} else if err != syscall.EAGAIN {
			break // the blocking write reports the error
		}
	}
	return n, bufs
}

// writeSome is one non-blocking writev of bufs (at most 1024 of them):
// the bytes written, or 0 and why none were.
func (w *connWriter) writeSome(bufs [][]byte) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	bufs = bufs[:min(len(bufs), 1024)]
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
		return 0, nil
	}
	w.n, w.err = 0, nil
	if err := w.rc.Write(w.write); err != nil {
		w.n, w.err = 0, err
	}
	n, err := w.n, w.err
	clear(w.iov) // keep no caller's buffer reachable
	if err != nil || n <= 0 {
		return 0, err
	}
	return n, nil
}

func (w *connWriter) writeFd(fd uintptr) bool {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(len(w.iov)))
	if e != 0 {
		w.err = e
		return true // EAGAIN included: the caller writes the rest the blocking way
	}
	w.n = int(r)
	return true
}

// rawRead is read(2) on a non-blocking descriptor, without telling the
// runtime that the thread enters a system call. Told (syscall.Read), the
// runtime's monitor takes the P of a thread that the kernel switched out
// in the call, which on a crowded host is common (the write that wakes a
// rank's peer on its CPU preempts it), and starts another thread to run
// it: with a single P a futex wake and a thread switch per call, and the
// monitor polling at its fastest. The same goes for connWriter's writev.
// Small collectives over TCP on crowded hosts gained the most.
func rawRead(fd uintptr, p []byte) (int, error) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// readProbe tells whether a connection has bytes to read without taking
// them: ppoll(2) with a zero timeout, without the runtime's system-call
// bookkeeping (a receive that yields runs it thousands of times a second;
// see rawRead).
type readProbe struct {
	rc    syscall.RawConn
	ready atomic.Bool // the last look's answer; concurrent receives may cross, which only costs a turn
	look  func(fd uintptr)
}

func newReadProbe(nc net.Conn) *readProbe {
	rc := rawConnOf(nc)
	if rc == nil {
		return nil
	}
	p := &readProbe{rc: rc}
	p.look = p.lookFd
	return p
}

// pollFd is struct pollfd.
type pollFd struct {
	fd             int32
	events, revent int16
}

const pollIn = 0x1 // POLLIN

func (p *readProbe) lookFd(fd uintptr) {
	pfd := pollFd{fd: int32(fd), events: pollIn}
	var zero syscall.Timespec
	n, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	// Bytes, the end of the stream (POLLHUP) or an error: the reader has
	// something to do.
	p.ready.Store(e != 0 || n > 0 && pfd.revent != 0)
}

// readable reports whether the reader would find something to read: a
// closed connection counts as readable. It goes through Control, not
// Read: the reader holds the descriptor's read lock while it is parked.
func (p *readProbe) readable() bool {
	if err := p.rc.Control(p.look); err != nil {
		return true
	}
	return p.ready.Load()
}

// crowdedYieldWait bounds how long a receive on a crowded host (TCP.crowd)
// yields the CPU while it waits for its peer's bytes before it parks
// like any other: long enough for a peer that shares a CPU to get its
// turn and answer, short enough that a rank waiting for a slow peer
// stops taking turns soon. Yielding made small all-reduces over TCP on
// crowded hosts faster than parking at once (see docs/tuning.md).
const crowdedYieldWait = time.Millisecond

// yieldUntilReadable lets other threads of any process run, its own
// goroutines first, until the connection has bytes to read, r is done,
// ctx ends, the mailbox fails (failed), or d (nanoseconds) has passed; it
// returns which. The receive then waits as usual: when bytes are there,
// its thread finds the parked reader ready in the network poller at once,
// without a wake-up from the kernel (and on a crowded host a turn of the
// CPU more).
func (c *tcpConn) yieldUntilReadable(ctx context.Context, r *recvOp, failed *atomic.Bool, d int64) yieldEnd {
	start := clock.Nanos()
	for {
		switch {
		case r.isDone():
			return yieldDone
		case ctx.Err() != nil:
			return yieldCtx
		case failed.Load():
			return yieldFailed
		case c.probe.readable():
			return yieldReadable
		case clock.Nanos()-start > d:
			return yieldTimeout
		}
		// The other ranks of this CPU first: sched_yield(2) without the
		// runtime's bookkeeping, which would let the monitor hand this
		// thread's P to another thread while the call gives the CPU
		// away. Then this process's other goroutines.
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		runtime.Gosched()
	}
}
