package native

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/transport"
)

// gatedSends is an endpoint whose sends to ranks 1 and 2 each wait until
// the other has started: it completes only sends that run side by side.
type gatedSends struct {
	transport.Endpoint
	once    [3]sync.Once
	started [3]chan struct{}
}

func newGatedSends(ep transport.Endpoint) *gatedSends {
	g := &gatedSends{Endpoint: ep}
	for i := range g.started {
		g.started[i] = make(chan struct{})
	}
	return g
}

func (g *gatedSends) Send(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	if peer == 1 || peer == 2 {
		g.once[peer].Do(func() { close(g.started[peer]) })
		other := 3 - peer
		select {
		case <-g.started[other]:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("the send to rank %d did not start beside the send to rank %d", other, peer)
		}
	}
	return g.Endpoint.Send(ctx, peer, h, payload)
}

// TestLargeSendsSideBySide: a step's large sends to several peers run side
// by side (concurrentSends), so the linear broadcast's root feeds every
// peer at once; small sends stay one after the other on the caller's
// goroutine, and so do sends through shared memory.
func TestLargeSendsSideBySide(t *testing.T) {
	eps := transport.NewInprocWorld(3, transport.InprocOptions{})
	gated := newGatedSends(eps[0])
	comms := []*Comm{NewWorld(gated, backend.Config{}), NewWorld(eps[1], backend.Config{}), NewWorld(eps[2], backend.Config{})}
	n := 2 * inlineSendBytes
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make([][]byte, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		got[r] = make([]byte, n)
		if r == 0 {
			copy(got[r], want)
		}
		wg.Go(func() {
			errs[r] = c.Run(ctx, &backend.Request{Kind: core.KindBroadcast, Seq: 1, DType: core.Uint8, Root: 0,
				Recv: got[r], SigCount: n, Algorithm: algo.Linear})
		})
	}
	wg.Wait()
	for r := range comms {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !bytes.Equal(got[r], want) {
			t.Fatalf("rank %d received other bytes", r)
		}
	}

	// Small sends: one after the other, as before.
	e := &execution{c: &Comm{ep: eps[0], size: 3, members: []int{0, 1, 2}}}
	shm := &execution{c: &Comm{ep: sharing{Endpoint: eps[0], local: map[int]bool{2: true}}, size: 3, members: []int{0, 1, 2}}}
	small := [][]byte{make([]byte, inlineSendBytes), make([]byte, inlineSendBytes)}
	large := [][]byte{make([]byte, n), make([]byte, n)}
	two := []algo.Xfer{{Peer: 1}, {Peer: 2}}
	for _, tt := range []struct {
		name string
		e    *execution
		xs   []algo.Xfer
		bufs [][]byte
		want bool
	}{
		{"large, two peers", e, two, large, true},
		{"small, two peers", e, two, small, false},
		{"large, one peer twice", e, []algo.Xfer{{Peer: 1}, {Peer: 1}}, large, false},
		{"large, one send", e, two[:1], large[:1], false},
		{"large, a peer through shared memory", shm, two, large, false},
	} {
		if got := tt.e.concurrentSends(tt.xs, tt.bufs); got != tt.want {
			t.Errorf("%s: concurrentSends %v, want %v", tt.name, got, tt.want)
		}
	}
}
