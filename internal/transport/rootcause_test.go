package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/gocomm/comm/core"
)

// abortThenVanish is an endpoint that aborts and then disappears at once,
// as a process does that exits right after its failing operation returns.
type abortThenVanish interface {
	Endpoint
	kill()
}

// TestAbortReachesPeersBeforeItReturns: a rank that aborts and exits right
// after Abort returns still tells its peers why: they fail with its abort
// (naming the first failure and who reported it), not with its
// disappearance.
func TestAbortReachesPeersBeforeItReturns(t *testing.T) {
	builds := map[string]func(t *testing.T) []abortThenVanish{
		"tcp": func(t *testing.T) []abortThenVanish {
			var out []abortThenVanish
			for _, e := range tcpWorld(t, 3, worldConfig{}) {
				out = append(out, e)
			}
			return out
		},
		"shm": func(t *testing.T) []abortThenVanish {
			var out []abortThenVanish
			for _, e := range shmWorld(t, 3) {
				out = append(out, e)
			}
			return out
		},
	}
	for name, build := range builds {
		t.Run(name, func(t *testing.T) {
			for i := range 5 {
				t.Run("", func(t *testing.T) {
					eps := build(t)
					ctx := tctx(t)
					h := Header{Comm: 1, Seq: 1, Sig: sig(1)}
					ch := goRecv(ctx, eps[0], 1, h, make([]byte, 1))
					time.Sleep(5 * time.Millisecond)
					// Rank 1 noticed rank 2 lost, aborts, and exits.
					eps[1].Abort(&PeerError{Peer: 2, Err: ErrPeerLost})
					eps[1].kill()
					r := waitResult(t, ch, 5*time.Second)
					var ra *RemoteAbortError
					if !errors.As(r.err, &ra) || ra.Origin != 2 || ra.Kind != core.FailLost || ra.Reporter != 1 {
						t.Fatalf("round %d: got %v, want rank 1's abort naming rank 2 lost", i, r.err)
					}
				})
			}
		})
	}
}

// TestAbortPassedOn: a rank aborted by another passes the abort on, so a
// rank that cannot hear the reporter (their connection is cut) and next
// hears from the passer only that it is gone still learns the first
// failure.
func TestAbortPassedOn(t *testing.T) {
	eps := tcpWorld(t, 3, worldConfig{})
	ctx := tctx(t)
	if err := eps[0].KillConn(1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	h := Header{Comm: 1, Seq: 1, Sig: sig(1)}
	ch := goRecv(ctx, eps[0], 2, h, make([]byte, 1))
	eps[1].Abort(errors.New("boom"))
	// Rank 2 fails by rank 1's abort; its failed receive returns once
	// the abort is passed on, and then rank 2 vanishes.
	if _, err := eps[2].Recv(ctx, 1, h, make([]byte, 1)); !errors.Is(err, ErrAborted) {
		t.Fatalf("rank 2: got %v, want aborted", err)
	}
	eps[2].kill()
	r := waitResult(t, ch, 5*time.Second)
	var ra *RemoteAbortError
	if !errors.As(r.err, &ra) || ra.Peer != 2 || ra.Origin != 1 || ra.Reporter != 1 || ra.Kind != core.FailError || ra.Reason != "boom" {
		t.Fatalf("rank 0: got %v, want rank 1's abort passed on by rank 2", r.err)
	}
}
