package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// TCP is an endpoint with one TCP connection to every other rank of the
// world (a full mesh), made by ConnectTCP. Each connection has one reader
// goroutine, which matches arriving messages to posted receives and reads
// payloads straight into posted buffers, and a write lock that serialises
// whole messages. Safe for concurrent use.
type TCP struct {
	rank, size  int
	maxFragment int           // largest data fragment accepted
	closeWait   time.Duration // bound for goodbye/abort writes and lingering
	readSpin    atomic.Int64  // TCPOptions.ReadSpin in nanoseconds; readers and waiting writes load it
	writing     atomic.Int32  // writes waiting for room in a socket (connWriter.waitRoom)
	// yieldWait is how long a receive yields the CPU while it waits for
	// its peer's bytes before it parks (crowd); 0: it parks at once.
	yieldWait atomic.Int64
	mb        *mailbox
	conns     []*tcpConn // by rank; nil at this rank; fixed after connect
	closedCh  chan struct{}
	wg        sync.WaitGroup // readers and abort writers
	abortWG   sync.WaitGroup // abort writers alone
	notices   waitNotices    // see WaitNotifier

	mu        sync.Mutex    // protects following
	closing   bool          // Close started
	abortSent bool          // Abort was called, or an abort is passed on
	abortDone chan struct{} // closed once every abort frame is flushed (see flushAbort)
}

// tcpConn is the connection to one peer.
type tcpConn struct {
	peer int
	conn net.Conn
	br   *bufio.Reader // used only by the reader goroutine

	// writeLock is a one-token semaphore held while a whole message (all
	// its fragments) is written, so frames never interleave; a channel so
	// waiting for it can be cancelled. After the goodbye it is never
	// released.
	writeLock  chan struct{}
	sendFrag   int              // fragment size for sends: min(ours, peer's)
	hdr        [headerSize]byte // guarded by writeLock
	iov        [][]byte         // guarded by writeLock
	bufs       net.Buffers      // guarded by writeLock: iov's rest, written the blocking way
	fast       *connWriter      // guarded by writeLock: the non-blocking first write; nil if none
	probe      *readProbe       // whether the socket has bytes to read (crowd); nil if it cannot tell
	readerDone chan struct{}
	wake       func()       // interruptRead, made once: recvOp.wake of the receives this reader writes
	gotGoodbye bool         // reader goroutine only
	inflight   *recvOp      // reader goroutine only: claimed receive being read into
	pending    *inflightMsg // reader goroutine only: message being collected
}

// aLongTimeAgo is a write deadline that interrupts a blocked write at once.
func aLongTimeAgo() time.Time { return time.Unix(1, 0) }

const (
	readBufSize = 64 << 10
	readChunk   = 1 << 20 // growth step of unexpected-message buffers
	// Unexpected messages of up to pooledMax bytes are read into recycled
	// buffers (getBig) of their announced size: a bogus header costs at
	// most pooledMax of (mostly untouched) memory; larger ones grow by
	// readChunk as bytes arrive. Fresh buffers for mid-size messages made
	// their all-reduces slower than larger pooled ones on crowded hosts.
	pooledMax = 64 << 20
)

// newTCP builds an endpoint over established, handshaken connections
// (conns[i] is the connection to rank i, with peerFrag[i] the peer's
// largest fragment) and starts their readers.
func newTCP(rank, size, maxFragment int, closeWait time.Duration, conns []net.Conn, peerFrag []int) *TCP {
	t := &TCP{
		rank:        rank,
		size:        size,
		maxFragment: maxFragment,
		closeWait:   closeWait,
		mb:          newMailbox(rank, size),
		conns:       make([]*tcpConn, size),
		closedCh:    make(chan struct{}),
		notices:     newWaitNotices(size),
	}
	for p, nc := range conns {
		if nc == nil || p == rank {
			continue
		}
		c := &tcpConn{
			peer:       p,
			conn:       nc,
			br:         bufio.NewReaderSize(newConnReader(nc, &t.readSpin, &t.writing), readBufSize),
			writeLock:  make(chan struct{}, 1),
			fast:       newConnWriter(nc, &t.readSpin, &t.writing),
			probe:      newReadProbe(nc),
			sendFrag:   min(maxFragment, peerFrag[p]),
			readerDone: make(chan struct{}),
		}
		c.wake = c.interruptRead
		t.conns[p] = c
	}
	for _, c := range t.conns {
		if c != nil {
			t.wg.Add(1)
			go t.readLoop(c)
		}
	}
	return t
}

// Rank returns this endpoint's rank.
func (t *TCP) Rank() int { return t.rank }

// Size returns the world size.
func (t *TCP) Size() int { return t.size }

// Send writes payload to peer as one message (several fragments if it is
// longer than the fragment size) with a single writev per message; payload
// is not copied and may be reused when Send returns. If ctx ends while
// waiting for the connection, Send returns ctx's error; if it ends while
// the message is partly written, the connection can no longer be framed:
// it is closed, the endpoint aborts, and Send returns an error wrapping
// ctx's error. See Endpoint.Send.
func (t *TCP) Send(ctx context.Context, peer int, h Header, payload []byte) error {
	if err := checkPeer(t.rank, t.size, peer, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.mb.sendErr(peer); err != nil {
		return err
	}
	if uint64(len(payload)) > maxMessage {
		return fmt.Errorf("comm: transport: message of %d bytes exceeds the limit %d", len(payload), uint64(maxMessage))
	}
	c := t.conns[peer]
	select {
	case c.writeLock <- struct{}{}:
	default:
		// Another send holds the connection: wait for it (ctx.Done only
		// now, as it may cost a timer).
		select {
		case c.writeLock <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.mb.failedCh:
			return t.mb.sendErr(peer)
		case <-t.mb.lostChan(peer):
			return t.mb.sendErr(peer)
		}
	}
	written, total, err := c.writeMessage(ctx, h, payload)
	<-c.writeLock
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if written == 0 {
			return ctx.Err()
		}
		cause := fmt.Errorf("%w: send to rank %d interrupted after %d of %d bytes; connection closed", ErrPeerLost, peer, written, total)
		t.connLost(c, cause)
		return fmt.Errorf("comm: transport: %w (send to rank %d interrupted mid-message; the connection was closed and the endpoint aborted)", ctx.Err(), peer)
	}
	// The connection broke. Let the reader see why (a goodbye, or the
	// peer's death) before deciding what to report.
	select {
	case <-c.readerDone:
	case <-t.mb.failedCh:
	case <-time.After(time.Second):
	}
	if err2 := t.mb.sendErr(peer); err2 != nil {
		return err2
	}
	t.connLost(c, fmt.Errorf("%w: write: %v", ErrPeerLost, err))
	return t.mb.sendErr(peer)
}

// writeMessage writes all fragments of one message; the caller holds
// writeLock.
func (c *tcpConn) writeMessage(ctx context.Context, h Header, payload []byte) (written, total int64, err error) {
	n := len(payload)
	nfrag := 1
	if n > c.sendFrag {
		nfrag = (n + c.sendFrag - 1) / c.sendFrag
	}
	hdrs := c.hdr[:]
	if nfrag > 1 {
		hdrs = make([]byte, nfrag*headerSize)
	}
	iov := c.iov[:0]
	fh := frameHeader{typ: frameData, h: h, total: uint64(n)}
	for i := range nfrag {
		off := i * c.sendFrag
		l := min(c.sendFrag, n-off)
		fh.offset, fh.fragLen = uint64(off), uint32(l)
		hb := hdrs[i*headerSize : (i+1)*headerSize]
		fh.encode(hb)
		iov = append(iov, hb)
		if l > 0 {
			iov = append(iov, payload[off:off+l])
		}
	}
	total = int64(nfrag*headerSize + n)
	// Most messages go in one non-blocking write: then there is nothing
	// to cancel, and ctx.Done (a timer and a channel, for an operation's
	// context) is never asked for.
	all := iov
	defer func() {
		clear(all) // do not keep the caller's payload reachable
		c.iov = all[:0]
	}()
	now, iov := c.fast.writeNow(ctx, iov)
	written = int64(now)
	if written == total {
		return written, total, nil
	}
	var stop func() bool
	var fired chan struct{}
	if ctx.Done() != nil {
		fired = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			c.conn.SetWriteDeadline(aLongTimeAgo())
			close(fired)
		})
	}
	c.bufs = iov
	rest, err := c.bufs.WriteTo(c.conn)
	written += rest
	c.bufs = nil
	if stop != nil && !stop() {
		<-fired
		c.conn.SetWriteDeadline(time.Time{})
	}
	return written, total, err
}

// dropFront returns bufs without its first n bytes (n at most their
// total), reusing bufs' array.
func dropFront(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 && n > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}

// Recv receives the next matching message into buf; a message that
// arrives while the receive is posted is read from the socket directly
// into buf. If ctx ends (or the endpoint fails) while a message is being
// read into buf, the reader is interrupted, also in a read that waits for
// a peer gone silent mid-message, and Recv returns once it has let go of
// buf; the message, moved aside, is queued as if it had arrived
// unexpected. See Endpoint.Recv.
func (t *TCP) Recv(ctx context.Context, peer int, h Header, buf []byte) (int, error) {
	if err := checkPeer(t.rank, t.size, peer, true); err != nil {
		return -1, err
	}
	from, _, err := t.recvMode(ctx, peer, h, buf, false, nil)
	if err != nil {
		t.flushAbort()
	}
	return from, err
}

// RecvSink is transport.SinkReceiver's: the connection's reader passes
// the message to sink piece by piece as it reads it, out of its 64 KiB
// buffer, so that a reducing receive reduces each piece while it is in
// cache (a message that arrived before the receive goes to sink whole).
func (t *TCP) RecvSink(ctx context.Context, peer int, h Header, buf []byte, sink func(off int, p []byte)) (int, error) {
	if err := checkPeer(t.rank, t.size, peer, false); err != nil {
		return -1, err
	}
	from, _, err := t.recvMode(ctx, peer, h, buf, false, sink)
	if err != nil {
		t.flushAbort()
	}
	return from, err
}

// recvMode is the mailbox's recvMode for a TCP endpoint. A receive from
// one peer is quiet (recvOp.quiet): it is recycled with its channel, so
// that a small operation allocates nothing. On a crowded host (crowd) it
// first yields the CPU until the peer's bytes are in the socket: its
// thread, kept awake, then picks up the reader parked in the network
// poller at its next look there instead of a thread woken by the kernel
// (figures at crowdedYieldWait). Elsewhere it parks at once, and the
// reader that completes it hands it the P next. A receive that polled
// with runtime.Gosched while the reader spins was a little faster for
// small operations but would queue behind every goroutine of a program
// that computes while it communicates, each for up to a scheduler time
// slice, where a parked one runs next: not kept.
func (t *TCP) recvMode(ctx context.Context, peer int, h Header, buf []byte, upTo bool, sink func(int, []byte)) (from, n int, err error) {
	quiet := peer != AnySource
	r, from, n, err := t.mb.startRecv(ctx, peer, h, buf, upTo, sink, quiet)
	if r == nil {
		return from, n, err
	}
	if d := t.yieldWait.Load(); d > 0 && quiet && t.conns[peer] != nil && t.conns[peer].probe != nil {
		t.conns[peer].yieldUntilReadable(ctx, r, &t.mb.hasFailed, d)
	}
	from, n, err = t.mb.wait(ctx, r)
	t.mb.recycle(r)
	return from, n, err
}

// Abort fails every pending and later operation with an *AbortError
// wrapping err (unless the endpoint has already failed, say because a peer
// was lost, which keeps that error) and sends an abort frame to every
// connected peer, whose endpoints abort with a *RemoteAbortError. The frame
// carries err's text (at most 4 KiB) and its root cause (RootCause: the
// rank that failed first, how, and who noticed); an endpoint that a peer
// aborted passes that peer's abort on instead, unchanged, so that a rank
// that only hears of the failure from a rank that has since exited still
// learns the first cause. Abort returns once the frames are written to
// the kernel, so a process that exits right after still tells its peers
// why; later calls wait for the same. A peer whose connection takes no
// frame within abortFlushWait (its socket is full, or another write to it
// is blocked) reads nothing: it is dead, stuck, or behind a dead link. Its
// frame is written in the background, until the close timeout, and Close
// waits for it, but Abort does not, since the error that this rank is
// about to report is due now.
func (t *TCP) Abort(err error) {
	t.startAbort(err)
	t.flushAbort()
}

// startAbort is Abort without waiting for the frames. With err nil it
// passes on the remote abort the mailbox failed with (the reader does
// that when an abort frame arrives).
func (t *TCP) startAbort(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.startAbortLocked(err)
}

// startAbortLocked is startAbort with t.mu held.
func (t *TCP) startAbortLocked(err error) {
	if t.closing || t.abortSent {
		return
	}
	if err != nil {
		t.mb.fail(&AbortError{Cause: err})
	}
	ab, skip, ok := t.abortToSend(err)
	if !ok {
		return
	}
	t.abortSent = true
	done := make(chan struct{})
	t.abortDone = done
	deadline := time.Now().Add(t.closeWait)
	var flushed sync.WaitGroup
	for _, c := range t.conns {
		if c != nil && c.peer != skip {
			t.wg.Add(1)
			t.abortWG.Add(1)
			flushed.Add(1)
			go t.writeAbort(c, ab, deadline, sync.OnceFunc(flushed.Done))
		}
	}
	go func() {
		flushed.Wait()
		close(done)
	}()
}

// abortToSend is the abort frame to send: the remote abort the mailbox
// failed with, passed on to every peer but its sender (skip), or else
// err's. ok is false when there is nothing to send (err is nil and no
// peer aborted this endpoint).
func (t *TCP) abortToSend(err error) (ab abortFrame, skip int, ok bool) {
	var ra *RemoteAbortError
	if merr := t.mb.failed(); merr != nil && errors.As(merr, &ra) {
		return abortFrame{origin: ra.Origin, kind: ra.Kind, reporter: ra.Reporter, reason: ra.Reason}, ra.Peer, true
	}
	if err == nil {
		return abortFrame{}, -1, false
	}
	origin, kind, reporter := RootCause(err, t.rank)
	return abortFrame{origin: origin, kind: kind, reporter: reporter, reason: abortReason(err)}, -1, true
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// flushAbort waits until the abort frames are flushed, if an abort is
// being sent: written to the kernel, given up (each write is bounded by
// the close timeout), or left to the background for a peer whose socket
// takes nothing (see Abort).
func (t *TCP) flushAbort() {
	t.mu.Lock()
	done := t.abortDone
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// failed reports whether the endpoint was aborted, here or by a peer, or
// lost a peer: its Close is then no orderly departure.
func (t *TCP) failed() bool {
	t.mu.Lock()
	sent := t.abortSent
	t.mu.Unlock()
	if sent {
		return true
	}
	t.mb.mu.Lock()
	err := t.mb.err
	t.mb.mu.Unlock()
	return err != nil && !errors.Is(err, ErrClosed)
}

// abortFlushWait bounds how long Abort waits for a peer's socket to take
// its abort frame (see Abort): a socket with room takes it at once.
const abortFlushWait = 20 * time.Millisecond

// writeAbort writes the abort frame ab to c before deadline, calling
// flushed once it is written, or given up, or no longer worth waiting for
// (see Abort).
func (t *TCP) writeAbort(c *tcpConn, ab abortFrame, deadline time.Time, flushed func()) {
	defer t.wg.Done()
	defer t.abortWG.Done()
	defer flushed()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	// A write that holds the connection longer than abortFlushWait (a
	// message, or a waiting notice) is blocked on a socket that takes
	// nothing: the frame waits for it, Abort does not.
	quick := time.NewTimer(abortFlushWait)
	defer quick.Stop()
	for locked := false; !locked; {
		select {
		case c.writeLock <- struct{}{}:
			locked = true
		case <-quick.C:
			flushed()
		case <-timer.C:
			return
		case <-t.closedCh:
			return
		case <-c.readerDone:
			return // the connection is gone: nobody to tell
		}
	}
	fh := ab.header()
	var hb [headerSize]byte
	fh.encode(hb[:])
	bufs := net.Buffers{hb[:], []byte(ab.reason)}
	c.conn.SetWriteDeadline(earliest(time.Now().Add(abortFlushWait), deadline))
	n, err := bufs.WriteTo(c.conn) // consumes what it writes
	if errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(deadline) {
		flushed()
		c.conn.SetWriteDeadline(deadline)
		var m int64
		m, err = bufs.WriteTo(c.conn)
		n += m
	}
	c.conn.SetWriteDeadline(time.Time{})
	<-c.writeLock
	if err != nil && n > 0 {
		c.conn.Close() // partly written: the stream is unusable
	}
}

// Close fails pending operations with ErrClosed, says goodbye to every
// peer (their receives from this rank that queued messages cannot serve
// fail with ErrPeerClosed), waits up to the close timeout for peers to
// hang up, closes the connections and waits for every goroutine. It
// returns nil; later calls wait for the first to finish.
func (t *TCP) Close() error {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		<-t.closedCh
		return nil
	}
	t.closing = true
	t.mu.Unlock()

	failed := t.failed()
	t.mb.close()
	deadline := time.Now().Add(t.closeWait)
	if failed {
		// A failed endpoint says no goodbye: peers must see the abort
		// frame (written first) or a lost connection, never an orderly
		// departure that would hide the cause.
		t.abortWG.Wait()
	} else {
		var wg sync.WaitGroup
		for _, c := range t.conns {
			if c != nil {
				wg.Go(func() { c.sayGoodbye(deadline) })
			}
		}
		wg.Wait()
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
wait:
	for _, c := range t.conns {
		if c == nil {
			continue
		}
		select {
		case <-c.readerDone:
		case <-timer.C:
			break wait
		}
	}
	for _, c := range t.conns {
		if c != nil {
			c.conn.Close()
		}
	}
	close(t.closedCh) // stops abort writers still waiting for a lock
	t.wg.Wait()
	return nil
}

// sayGoodbye writes the goodbye frame and half-closes the connection. It
// keeps the write lock, so nothing can follow the goodbye.
func (c *tcpConn) sayGoodbye(deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case c.writeLock <- struct{}{}:
	case <-timer.C:
		return
	case <-c.readerDone:
		return // connection already dead
	}
	fh := frameHeader{typ: frameGoodbye}
	var hb [headerSize]byte
	fh.encode(hb[:])
	c.conn.SetWriteDeadline(deadline)
	if _, err := c.conn.Write(hb[:]); err != nil {
		return
	}
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// kill makes the endpoint vanish as if its process crashed: connections
// are cut without goodbye, so every peer aborts with a *PeerError wrapping
// ErrPeerLost that names this rank; this endpoint's own operations fail
// with ErrAborted. Close must still be called to wait for goroutines. For
// fault-injection tests.
func (t *TCP) kill() {
	t.mb.fail(&AbortError{Cause: errKilled})
	for _, c := range t.conns {
		if c != nil {
			c.conn.Close()
		}
	}
}

// KillConn cuts the connection to peer abruptly, without goodbye, as a
// network failure would: both ends abort with ErrPeerLost. For
// fault-injection tests.
func (t *TCP) KillConn(peer int) error {
	if err := checkPeer(t.rank, t.size, peer, false); err != nil {
		return err
	}
	return t.conns[peer].conn.Close()
}

// peerVanished aborts the endpoint because peer broke off outside the
// connection in a way that is a loss now (its process is gone while this
// rank copied a message out of it, or it broke the ring protocol), after
// giving the connection's reader a moment to take in what the peer wrote
// before it went: an abort it sent first is the cause to report, not its
// disappearance. cause wraps ErrPeerLost.
func (t *TCP) peerVanished(peer int, cause error) {
	c := t.conns[peer]
	timer := time.NewTimer(min(t.closeWait, vanishWait))
	defer timer.Stop()
	select {
	case <-c.readerDone:
	case <-t.mb.failedCh:
	case <-timer.C:
	}
	t.connLost(c, cause)
}

// vanishWait bounds how long peerVanished waits for the reader.
const vanishWait = time.Second

// connLost aborts the endpoint because the connection c failed with cause
// (which wraps ErrPeerLost) and closes it.
func (t *TCP) connLost(c *tcpConn, cause error) {
	t.mb.fail(&AbortError{Cause: &PeerError{Peer: c.peer, Err: cause}})
	c.conn.Close()
}

// peerLost aborts the endpoint because peer broke off outside the
// connection (cause wraps ErrPeerLost; see connLost), for an endpoint that
// shares this one's mailbox and moves some of peer's messages itself.
func (t *TCP) peerLost(peer int, cause error) { t.connLost(t.conns[peer], cause) }

// mailbox returns the mailbox the endpoint delivers into, for an
// endpoint that moves some peers' messages itself and delivers them into
// the same one (so that receives match across both, and fail together).
func (t *TCP) mailbox() *mailbox { return t.mb }

// crowd sets the endpoint up for ranks that outnumber the host's cores:
// readers park at once (no TCPOptions.ReadSpin), since a polling reader
// takes a core from a rank with work to do, and a receive yields the CPU
// while it waits (crowdedYieldWait) instead.
func (t *TCP) crowd() {
	t.readSpin.Store(0)
	if pollingReads {
		t.yieldWait.Store(int64(crowdedYieldWait))
	}
}

func (t *TCP) isClosing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closing
}

// readLoop is the connection's reader goroutine: it reads frames until
// the connection ends. A clean end is a goodbye followed by EOF; any other
// end (EOF, reset, a malformed frame) while the endpoint is open aborts it
// with ErrPeerLost naming the peer.
func (t *TCP) readLoop(c *tcpConn) {
	defer t.wg.Done()
	defer close(c.readerDone)
	err := t.readFrames(c)
	switch {
	case err == nil:
		// Goodbye, then EOF: the peer is gone for good.
	case t.isClosing():
	default:
		// Everything the peer sent before its connection ended has been
		// delivered: the loss matters only to operations that still need
		// the peer (or to a message it left half-sent).
		cause := &PeerError{Peer: c.peer, Err: fmt.Errorf("%w: %v", ErrPeerLost, err)}
		t.mb.peerLost(c.peer, cause, c.inflight != nil || c.pending != nil)
	}
	c.conn.Close()
	if c.inflight != nil {
		t.mb.abandon(c.inflight)
		c.inflight = nil
	}
	if c.pending != nil {
		t.mb.dropInflight(c.pending)
		c.pending = nil
	}
}

// readFrames reads frames until an error; it returns nil when the
// connection ends after a goodbye.
func (t *TCP) readFrames(c *tcpConn) error {
	var hb [headerSize]byte
	for {
		if err := c.readFull(hb[:]); err != nil {
			if c.gotGoodbye {
				return nil // the peer is gone, however the socket ended
			}
			if err == io.EOF {
				return fmt.Errorf("connection closed without goodbye")
			}
			return err
		}
		fh, err := decodeFrameHeader(hb[:], t.maxFragment)
		if err != nil {
			return err
		}
		if c.gotGoodbye {
			return fmt.Errorf("protocol error: %v frame after goodbye", fh.typ)
		}
		switch fh.typ {
		case frameData:
			if fh.offset != 0 {
				return fmt.Errorf("protocol error: fragment at offset %d without the message's start", fh.offset)
			}
			if err := t.readMessage(c, &fh, hb[:]); err != nil {
				return err
			}
			if pollingReads && c.br.Buffered() == 0 {
				// The receive this message completed (if any) waits
				// for a P, most often this one: let it run now rather
				// than after the next read of an empty socket (a
				// system call on every small operation's path).
				runtime.Gosched()
			}
		case frameAbort:
			reason := make([]byte, fh.fragLen)
			if err := c.readFull(reason); err != nil {
				return err
			}
			// Pass it on at once: a peer that next hears from this rank
			// only that it is gone must still learn the cause. The
			// mailbox fails under t.mu, so an operation it wakes finds
			// the frames being sent (flushAbort) and returns only once
			// they are written.
			t.mu.Lock()
			if t.mb.fail(remoteAbort(c.peer, t.size, &fh, reason)) {
				t.startAbortLocked(nil)
			}
			t.mu.Unlock()
		case frameGoodbye:
			c.gotGoodbye = true
			t.mb.peerGone(c.peer)
		case frameWaiting:
			w, err := waitingNotice(&fh, t.size)
			if err != nil {
				return err
			}
			t.notices.hear(c.peer, w)
		}
	}
}

// readMessage reads the payload of the message whose first fragment
// header is first, and its remaining fragments, into a posted receive's
// buffer, a fresh buffer (handed to a receive posted meanwhile), or
// nowhere. On error, c.inflight or c.pending is left for readLoop to end.
func (t *TCP) readMessage(c *tcpConn, first *frameHeader, hb []byte) error {
	if first.total > uint64(maxInt) {
		return fmt.Errorf("message of %d bytes does not fit in memory here", first.total)
	}
	total := int(first.total)
	r, im, what := t.mb.arriveStream(c.peer, first.h, total, c.wake)
	s := payloadRead{what: what, r: r, im: im, total: total}
	switch what {
	case arriveDirect:
		c.inflight = r
	case arriveQueue:
		c.pending = im
		if s.pooled = total <= pooledMax; s.pooled {
			// Recycled memory: fresh memory page-faults, which on a
			// virtual machine is slower than the copy.
			s.data = getBig(total)[:0]
		} else {
			s.data = make([]byte, 0, min(total, readChunk))
		}
	}
	fh := *first
	for {
		end := s.got + int(fh.fragLen)
		for s.got < end {
			var err error
			switch s.what {
			case arriveDirect:
				var n int
				n, err = readDirect(c.br, s.r, s.got, end)
				s.got += n
			case arriveQueue:
				s.data, err = readAppend(c.br, s.data, min(end-s.got, readChunk), total)
				s.got = len(s.data)
			case arriveDrop:
				var n int
				n, err = c.br.Discard(end - s.got)
				s.got += n
			}
			if err != nil && !c.interrupted(err) {
				return err
			}
			t.answerReceive(c, &s)
		}
		if s.got == total {
			break
		}
		// The next fragment's header; a receive may ask for its buffer
		// back meanwhile.
		for n := 0; n < len(hb); {
			k, err := io.ReadFull(c.br, hb[n:])
			n += k
			if err != nil && !c.interrupted(err) {
				return err
			}
			t.answerReceive(c, &s)
		}
		next, err := decodeFrameHeader(hb, t.maxFragment)
		if err != nil {
			return err
		}
		if !next.continues(first, uint64(s.got)) {
			return fmt.Errorf("protocol error: %v frame at offset %d inside a %d-byte message at offset %d", next.typ, next.offset, total, s.got)
		}
		fh = next
	}
	switch s.what {
	case arriveDirect:
		c.inflight = nil
		t.mb.complete(s.r)
	case arriveQueue:
		switch {
		case s.im != nil:
			c.pending = nil
			t.mb.deliverInflight(s.im, s.data, s.pooled)
		case s.pooled:
			t.mb.deliverPooled(c.peer, first.h, s.data)
		default:
			t.mb.deliver(c.peer, first.h, s.data)
		}
	}
	return nil
}

// payloadRead is a reader's progress through one message's payload.
type payloadRead struct {
	what   arrival
	r      *recvOp      // arriveDirect: the receive whose buffer takes the payload
	im     *inflightMsg // arriveQueue: the message as a receive may claim it; nil once none can
	data   []byte       // arriveQueue: the payload so far
	pooled bool         // data is from getBig
	got    int          // bytes of the payload read
	total  int
}

// answerReceive does what a receive asked of the reader since its last
// read (see recvOp.stop and inflightMsg.handoff). A receive being written
// into that was asked to stop (its ctx ended, or the endpoint failed)
// gets its buffer back: what it holds moves to a fresh buffer and the
// message goes on as if it had arrived unexpected (the rest of a sink's
// message, whose pieces cannot be given back, is dropped instead). A
// receive that claimed the message meanwhile takes it over: the payload
// so far moves into its buffer and the rest is read there; unless it was
// asked to stop in the meantime, when it is let go with its buffer
// untouched.
func (t *TCP) answerReceive(c *tcpConn, s *payloadRead) {
	switch s.what {
	case arriveDirect:
		if !s.r.stop.Load() {
			return
		}
		r := s.r
		if r.sink != nil {
			s.what = arriveDrop
		} else {
			s.data = make([]byte, s.got, s.total)
			copy(s.data, r.buf[:s.got])
			s.pooled = false
			s.what = arriveQueue
		}
		c.inflight, s.r = nil, nil
		t.mb.abandon(r)
	case arriveQueue:
		if s.im == nil || !s.im.handoff.Load() {
			return
		}
		r := t.mb.takeHandoff(s.im)
		c.pending, s.im = nil, nil
		if r.stop.Load() {
			t.mb.abandon(r)
			return
		}
		r.put(0, s.data[:s.got])
		if s.pooled {
			putBig(s.data)
		}
		s.data, s.pooled = nil, false
		c.inflight, s.r, s.what = r, r, arriveDirect
	}
}

// interruptRead makes the reader's socket read return at once (a read
// deadline in the past), so that it answers a receive that asked for its
// buffer back (recvOp.wake) even while the peer sends nothing: a peer
// behind a dead link, whose message stops halfway, never does, and its
// connection ends only when TCP gives up, many minutes later.
func (c *tcpConn) interruptRead() { c.conn.SetReadDeadline(aLongTimeAgo()) }

// interrupted reports whether err is a read interrupted by interruptRead,
// which it clears so that reading can go on. It clears it before the
// caller looks at what receives asked: an interruption asked for after
// that is not lost, it ends the next read.
func (c *tcpConn) interrupted(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	c.conn.SetReadDeadline(time.Time{})
	return true
}

// readFull is io.ReadFull from the connection, reading on after an
// interruption (interruptRead): for bytes that no receive's buffer takes.
func (c *tcpConn) readFull(p []byte) error {
	for n := 0; ; {
		k, err := io.ReadFull(c.br, p[n:])
		n += k
		if err == nil || !c.interrupted(err) {
			return err
		}
	}
}

const maxInt = int(^uint(0) >> 1)

// readAppend reads n more bytes onto data, growing it as bytes arrive (not
// by what a header announces), never past capacity total. On error data
// holds every byte read.
func readAppend(br *bufio.Reader, data []byte, n, total int) ([]byte, error) {
	for n > 0 {
		chunk := min(n, readChunk)
		if cap(data)-len(data) < chunk {
			grown := make([]byte, len(data), min(max(2*cap(data), len(data)+chunk), total))
			copy(grown, data)
			data = grown
		}
		start := len(data)
		data = data[:start+chunk]
		if k, err := io.ReadFull(br, data[start:]); err != nil {
			return data[:start+k], err // every byte read: the reader may read on
		}
		n -= chunk
	}
	return data, nil
}

// readDirect reads bytes [got, end) of r's message from br, as much as
// one read gives: into r.buf, or for a receive with a sink through the
// reader's buffer (see recvOp.sink).
func readDirect(br *bufio.Reader, r *recvOp, got, end int) (int, error) {
	if r.sink == nil {
		return br.Read(r.buf[got:end])
	}
	if br.Buffered() == 0 {
		if _, err := br.Peek(1); err != nil {
			return 0, err
		}
	}
	p, err := br.Peek(min(br.Buffered(), end-got))
	if err != nil {
		return 0, err
	}
	r.sink(got, p)
	_, err = br.Discard(len(p))
	return len(p), err
}
