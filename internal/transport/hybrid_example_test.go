//go:build linux && !gocomm_portable

package transport_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/transport"
	"github.com/gocomm/comm/rendezvous"
)

// Two ranks on one host (same HostID) connect through a store: messages
// between them move through shared memory, while a TCP connection beside
// the rings carries goodbyes, aborts and the news of a crash. Separate
// processes do the same with a shared store (rendezvous.TCPStore). Where
// the build has no shared memory (outside Linux, or -tags gocomm_portable)
// the same code connects them over TCP, and SharedMemory is false.
func ExampleConnectHybrid() {
	store := rendezvous.NewMemStore()
	ctx := context.Background()
	eps := make([]*transport.Hybrid, 2)
	var wg sync.WaitGroup
	for r := range eps {
		wg.Go(func() {
			var err error
			eps[r], err = transport.ConnectHybrid(ctx, store, transport.HybridOptions{
				TCPOptions: transport.TCPOptions{Rank: r, Size: 2, Prefix: "example"},
				HostID:     "host-a", // "" detects this machine's identity
			})
			if err != nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	defer eps[0].Close()
	defer eps[1].Close()

	h := transport.Header{Comm: 1, Tag: 7, Sig: transport.Signature{Kind: core.KindSend, DType: core.Byte, Count: 5}}
	if err := eps[0].Send(ctx, 1, h, []byte("hello")); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 5)
	from, err := eps[1].Recv(ctx, 0, h, buf)
	fmt.Println(from, string(buf), err, eps[1].SharedMemory(0))
	// Output: 0 hello <nil> true
}
