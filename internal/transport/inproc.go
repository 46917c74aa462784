package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// InprocOptions configures NewInprocWorld. The zero value is ready to use;
// it has no fields yet and exists so knobs can be added compatibly.
type InprocOptions struct{}

// Inproc is an endpoint of a world whose ranks all live in one process,
// for tests and single-process runs. It has the mailbox semantics of TCP:
// Send copies the payload into the receiver's posted buffer, or into a
// fresh buffer queued for a later Recv, and returns. It starts no
// goroutines. Safe for concurrent use.
type Inproc struct {
	rank  int
	world []*Inproc // shared by every endpoint of the world; read-only
	mb    *mailbox
	// notices holds what peers said they wait for (WaitNotifier).
	notices waitNotices

	mu        sync.Mutex // protects following
	abortSent bool       // Abort was called
	dead      bool       // closed or killed
}

// NewInprocWorld returns the size endpoints of a new in-process world;
// element i has rank i. It returns nil if size < 1.
func NewInprocWorld(size int, opts InprocOptions) []*Inproc {
	if size < 1 {
		return nil
	}
	world := make([]*Inproc, size)
	for i := range world {
		world[i] = &Inproc{rank: i, world: world, mb: newMailbox(i, size), notices: newWaitNotices(size)}
	}
	return world
}

// Rank returns this endpoint's rank.
func (e *Inproc) Rank() int { return e.rank }

// Size returns the world size.
func (e *Inproc) Size() int { return len(e.world) }

// Send copies payload to peer's mailbox; payload may be reused as soon as
// it returns. See Endpoint.Send.
func (e *Inproc) Send(ctx context.Context, peer int, h Header, payload []byte) error {
	if err := checkPeer(e.rank, len(e.world), peer, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.mb.sendErr(peer); err != nil {
		return err
	}
	dst := e.world[peer].mb
	r, what := dst.arrive(e.rank, h, len(payload))
	switch what {
	case arriveDirect:
		r.put(0, payload)
		dst.complete(r)
	case arriveQueue:
		dst.deliver(e.rank, h, append(make([]byte, 0, len(payload)), payload...))
	}
	return nil
}

// Recv receives into buf; see Endpoint.Recv.
func (e *Inproc) Recv(ctx context.Context, peer int, h Header, buf []byte) (int, error) {
	if err := checkPeer(e.rank, len(e.world), peer, true); err != nil {
		return -1, err
	}
	return e.mb.recv(ctx, peer, h, buf)
}

// Abort fails every pending and later operation with an *AbortError
// wrapping err (unless the endpoint has already failed, which keeps that
// error) and aborts every other live endpoint of the world with a
// *RemoteAbortError. Only the first call does anything.
func (e *Inproc) Abort(err error) {
	e.mu.Lock()
	if e.abortSent || e.dead {
		e.mu.Unlock()
		return
	}
	e.abortSent = true
	e.mu.Unlock()
	e.mb.fail(&AbortError{Cause: err})
	ra := &RemoteAbortError{Peer: e.rank, Reason: abortReason(err)}
	ra.Origin, ra.Kind, ra.Reporter = RootCause(err, e.rank)
	if merr := e.mb.failed(); merr != nil {
		// Aborted by a peer already: pass its root cause on.
		var prev *RemoteAbortError
		if errors.As(merr, &prev) {
			ra.Origin, ra.Kind, ra.Reporter, ra.Reason = prev.Origin, prev.Kind, prev.Reporter, prev.Reason
		}
	}
	for _, p := range e.world {
		if p != e {
			p.mb.fail(ra)
		}
	}
}

// Close fails pending operations with ErrClosed and says goodbye to every
// peer: their receives from this rank that queued messages cannot serve
// fail with ErrPeerClosed. It always returns nil.
func (e *Inproc) Close() error {
	if !e.markDead() {
		return nil
	}
	e.mb.close()
	for _, p := range e.world {
		if p != e {
			p.mb.peerGone(e.rank)
		}
	}
	return nil
}

// errKilled is the cause of a killed endpoint's own errors.
var errKilled = errors.New("endpoint killed (fault injection)")

// kill makes the endpoint vanish as if its process crashed: every other
// endpoint aborts with a *PeerError wrapping ErrPeerLost that names this
// rank, and this endpoint's own operations fail with ErrAborted. For tests.
func (e *Inproc) kill() {
	if !e.markDead() {
		return
	}
	e.mb.fail(&AbortError{Cause: errKilled})
	for _, p := range e.world {
		if p != e {
			// What it sent is delivered already: a loss only for what
			// still needs it (see mailbox.peerLost).
			p.mb.peerLost(e.rank, &PeerError{Peer: e.rank, Err: fmt.Errorf("%w: %v", ErrPeerLost, errKilled)}, false)
		}
	}
}

func (e *Inproc) markDead() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		return false
	}
	e.dead = true
	return true
}

// checkPeer validates the peer argument of Send (anySource false) or Recv.
func checkPeer(rank, size, peer int, anySource bool) error {
	if anySource && peer == AnySource {
		if size < 2 {
			return fmt.Errorf("%w: AnySource in a world of 1", ErrBadPeer)
		}
		return nil
	}
	if peer < 0 || peer >= size {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrBadPeer, peer, size)
	}
	if peer == rank {
		return fmt.Errorf("%w: %d is this rank", ErrBadPeer, peer)
	}
	return nil
}

// abortReason is the text an abort carries to peers, bounded for the wire.
func abortReason(err error) string {
	s := "abort requested"
	if err != nil {
		s = err.Error()
	}
	if len(s) > maxAbortReason {
		s = s[:maxAbortReason]
	}
	return s
}
