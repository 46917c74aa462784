package transport

import "context"

// UpToReceiver is implemented by endpoints that can receive a message
// shorter than the buffer posted for it, as MPI_Recv does (every endpoint
// of this package does).
type UpToReceiver interface {
	// RecvUpTo is Recv for a message of at most len(buf) bytes whose
	// signature matches h.Sig in all but Count. It returns the message's
	// length n and the sender (as net.PacketConn.ReadFrom does, and
	// comm.RecvUpTo); the message is in buf[:n] and buf[n:] is
	// untouched. A longer message fails the receive with a *LengthError
	// (Got the message's length, Want len(buf)) and is consumed: it is
	// not delivered to a later receive, the connection stays in step, and
	// the endpoint goes on (nothing is aborted).
	RecvUpTo(ctx context.Context, peer int, h Header, buf []byte) (n, from int, err error)
}

var (
	_ UpToReceiver = (*TCP)(nil)
	_ UpToReceiver = (*Inproc)(nil)
	_ UpToReceiver = (*Hybrid)(nil)
)

// RecvUpTo receives a message of at most len(buf) bytes; see UpToReceiver.
func (t *TCP) RecvUpTo(ctx context.Context, peer int, h Header, buf []byte) (n, from int, err error) {
	if err := checkPeer(t.rank, t.size, peer, true); err != nil {
		return 0, -1, err
	}
	from, n, err = t.recvMode(ctx, peer, h, buf, true, nil)
	return n, from, err
}

// RecvUpTo receives a message of at most len(buf) bytes; see UpToReceiver.
func (e *Inproc) RecvUpTo(ctx context.Context, peer int, h Header, buf []byte) (n, from int, err error) {
	if err := checkPeer(e.rank, len(e.world), peer, true); err != nil {
		return 0, -1, err
	}
	from, n, err = e.mb.recvMode(ctx, peer, h, buf, true)
	return n, from, err
}

// RecvUpTo receives a message of at most len(buf) bytes; see
// UpToReceiver. From a peer on this host it takes the rings' general
// path (the mailbox), never the fast path of Recv, which takes only a
// message of exactly the buffer's length.
func (e *Hybrid) RecvUpTo(ctx context.Context, peer int, h Header, buf []byte) (n, from int, err error) {
	if err := checkPeer(e.rank, e.size, peer, true); err != nil {
		return 0, -1, err
	}
	if e.shm == nil || !e.shm.polls(peer) {
		from, n, err = e.t.recvMode(ctx, peer, h, buf, true, nil)
		return n, from, err
	}
	return e.shm.recvUpTo(ctx, peer, h, buf)
}

// recvUpTo is shmEndpoint.recv for RecvUpTo: the receive is posted in the
// mailbox, and this goroutine polls the rings (await) until it is done.
func (e *shmEndpoint) recvUpTo(ctx context.Context, peer int, h Header, buf []byte) (n, from int, err error) {
	e.mapMu.RLock()
	defer e.mapMu.RUnlock()
	if e.unmapped {
		return 0, -1, e.mb.failed()
	}
	r, from, n, err := e.mb.startRecvMode(ctx, peer, h, buf, true, nil)
	if r == nil {
		return n, from, err
	}
	bo := Backoff{spin: e.opts.SpinWait, yield: e.opts.YieldWait}
	from, err = e.await(ctx, r, false, &bo)
	if err != nil {
		return 0, from, err
	}
	return r.n, from, nil
}
