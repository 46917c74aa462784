package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/transport"
)

var _ backend.Capabilities = (*Comm)(nil)

// Supports reports the capabilities of the native backend: every one of
// backend.BaseCapabilities, and RecvUpTo when the endpoint can receive a
// message shorter than the buffer (every endpoint of package transport
// can; one from elsewhere may not).
func (c *Comm) Supports(cp backend.Capability) bool {
	if cp == backend.RecvUpTo {
		_, ok := c.ep.(transport.UpToReceiver)
		return ok
	}
	return backend.BaseCapabilities(cp)
}

// recvUpTo is recv for a Request with UpTo: it returns the message's
// length and the sender's world rank.
func (c *Comm) recvUpTo(ctx context.Context, peer int, req *backend.Request) (n, from int, err error) {
	ur, ok := c.ep.(transport.UpToReceiver)
	if !ok {
		return 0, -1, fmt.Errorf("comm: native backend: the endpoint (%T) cannot receive a message shorter than the buffer (no RecvUpTo)", c.ep)
	}
	n, from, err = ur.RecvUpTo(ctx, peer, c.p2pHeader(req), req.Recv)
	var le *transport.LengthError
	if errors.As(err, &le) {
		err = tooLong(c.commRank(le.Peer), le.Got, le.Want, req.DType.Size())
	}
	return n, from, err
}

// tooLong is the error of a RecvUpTo whose message (got bytes) is longer
// than its buffer (want bytes), in elements of es bytes.
func tooLong(peer, got, want, es int) error {
	es = max(es, 1)
	return fmt.Errorf("%w: rank %d sent %d elements (%d bytes) but the receive buffer holds %d; the message was consumed and dropped",
		transport.ErrLength, peer, got/es, got, want/es)
}
