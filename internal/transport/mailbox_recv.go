package transport

import (
	"context"
	"errors"
	"sync/atomic"
)

type recvState uint8

const (
	recvPosted  recvState = iota // queued in the mailbox, waiting for a message
	recvClaimed                  // a message is being written into buf
	recvDone                     // result set and done closed
)

// recvOp is one posted receive.
type recvOp struct {
	peer int // sender rank or AnySource
	h    Header
	buf  []byte
	// done is closed once state is recvDone. A quiet receive (TCP.recvMode)
	// has none until its owner must block (mailbox.doneChan), and then one
	// of capacity 1 that completion sends a token to instead, which the
	// owner alone takes: the channel is recycled with the receive, as a
	// channel per receive was an allocation per small operation.
	done chan struct{}
	// finished is set once state is recvDone, after from, n and err.
	finished atomic.Bool
	// quiet: the receive is TCP.recvMode's own, recycled once done
	// (mailbox.recycle) unless its channel was made.
	quiet bool
	// upTo: the message may be shorter than buf (RecvUpTo); its signature
	// must match h.Sig in all but Count.
	upTo bool
	// sink, if set, takes the message's bytes instead of buf (which then
	// only gives the length): whoever would copy bytes at offset off of
	// the message into buf calls sink(off, p) instead, in order of off,
	// each call before the next piece is taken in (see put).
	sink func(off int, p []byte)

	// stop asks whoever writes into buf (a claimed receive) to give the
	// buffer back: the receive's ctx ended or the mailbox failed.
	stop atomic.Bool
	// wake, if set, makes the writer of a claimed receive look at stop
	// now, also when it is blocked waiting for the peer's next bytes
	// (which, from a peer behind a dead link, never come): a connection's
	// reader interrupts its socket read. Set with the claim, under
	// mailbox.mu.
	wake func()

	// Guarded by mailbox.mu.
	state recvState
	from  int
	err   error
	// n is the message's length, set when a message is matched to the
	// receive (fit cuts buf to it).
	n int
}

// errRecvAbandoned finishes a claimed receive whose ctx ended while its
// message was being read; its Recv returns ctx.Err().
var errRecvAbandoned = errors.New("receive abandoned")

// markDone tells r's owner that r is done, with mailbox.mu held (which
// recycle takes too).
func (r *recvOp) markDone() {
	if r.done != nil {
		if r.quiet {
			select {
			case r.done <- struct{}{}:
			default:
			}
		} else {
			close(r.done)
		}
	}
	r.finished.Store(true)
}

// isDone reports whether r is done (its result is set).
func (r *recvOp) isDone() bool { return r.finished.Load() }

// put writes p, the bytes at offset off of r's message: into r.buf, or
// to r.sink. p may be reused once put returns.
func (r *recvOp) put(off int, p []byte) {
	if r.sink != nil {
		r.sink(off, p)
		return
	}
	copy(r.buf[off:], p)
}

// fit records that a message of n bytes, which passed checkMatch, is
// matched to r: buf is cut to the message, so whoever writes the message
// into r.buf writes exactly r.buf.
func (r *recvOp) fit(n int) {
	r.buf = r.buf[:n]
	r.n = n
}

// askStop asks the writer of a claimed receive to give its buffer back,
// at once (wake) where it can be blocked. With mailbox.mu held.
func (r *recvOp) askStop() {
	r.stop.Store(true)
	if r.wake != nil {
		r.wake()
	}
}

// result is the outcome of a receive whose done channel is closed, for a
// Recv with context ctx.
func (r *recvOp) result(ctx context.Context) (int, error) {
	if r.err == errRecvAbandoned {
		return -1, ctx.Err()
	}
	return r.from, r.err
}

// closedChan is the done channel of a quiet receive that was done before
// its owner asked for one.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()
