package transport

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// TestMailboxMatchesModel drives one mailbox with random interleavings of
// arrivals and receives (specific sender or AnySource, a few keys) and
// checks every receive gets the message a naive model predicts: the first
// posted receive that accepts a message gets it; a receive takes the
// earliest queued message it accepts.
func TestMailboxMatchesModel(t *testing.T) {
	type modelMsg struct{ from, id int }
	type modelRecv struct {
		peer int
		key  int
		want int // expected message id, -1 while unknown
		got  chan recvResult
		buf  []byte
	}
	for trial := range 100 {
		rng := rand.New(rand.NewPCG(uint64(trial), 1))
		mb := newMailbox(0, 3)
		arrived := map[int][]modelMsg{}
		posted := map[int][]*modelRecv{}
		var all []*modelRecv
		nextID := 0
		hdr := func(key int) Header { return Header{Comm: 1, Tag: uint64(key), Sig: sig(8)} }
		ctx, cancel := context.WithCancel(context.Background())
		for range 40 {
			key := rng.IntN(2)
			if rng.IntN(2) == 0 { // a message arrives
				from := 1 + rng.IntN(2)
				id := nextID
				nextID++
				data := binary.LittleEndian.AppendUint64(nil, uint64(id))
				matched := false
				for i, r := range posted[key] {
					if r.peer == AnySource || r.peer == from {
						r.want = id
						posted[key] = append(posted[key][:i:i], posted[key][i+1:]...)
						matched = true
						break
					}
				}
				if !matched {
					arrived[key] = append(arrived[key], modelMsg{from, id})
				}
				mb.deliver(from, hdr(key), data)
				continue
			}
			peer := []int{1, 2, AnySource}[rng.IntN(3)]
			r := &modelRecv{peer: peer, key: key, want: -1, got: make(chan recvResult, 1), buf: make([]byte, 8)}
			for i, m := range arrived[key] {
				if peer == AnySource || m.from == peer {
					r.want = m.id
					arrived[key] = append(arrived[key][:i:i], arrived[key][i+1:]...)
					break
				}
			}
			if r.want < 0 {
				posted[key] = append(posted[key], r)
			}
			all = append(all, r)
			go func() {
				from, err := mb.recv(ctx, r.peer, hdr(r.key), r.buf)
				r.got <- recvResult{from, err}
			}()
			// Wait until the receive is done or posted, so the order of
			// operations is the model's.
			for deadline := time.Now().Add(5 * time.Second); ; {
				if r.want >= 0 && len(r.got) > 0 || r.want < 0 && countPosted(mb) == countModel(posted) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("receive neither completed nor posted")
				}
				time.Sleep(10 * time.Microsecond)
			}
		}
		cancel()
		for i, r := range all {
			res := <-r.got
			if r.want < 0 {
				if res.err == nil {
					t.Fatalf("trial %d receive %d: got a message, model says none", trial, i)
				}
				continue
			}
			if res.err != nil {
				t.Fatalf("trial %d receive %d: %v, model says message %d", trial, i, res.err, r.want)
			}
			if got := int(binary.LittleEndian.Uint64(r.buf)); got != r.want {
				t.Fatalf("trial %d receive %d (peer %d key %d): got message %d, want %d", trial, i, r.peer, r.key, got, r.want)
			}
		}
	}
}

func countPosted(mb *mailbox) int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	n := 0
	for _, kq := range mb.byKey {
		n += len(kq.posted)
	}
	return n
}

func countModel[T any](m map[int][]T) int {
	n := 0
	for _, l := range m {
		n += len(l)
	}
	return n
}
