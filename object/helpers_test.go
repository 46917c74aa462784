package object_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/rendezvous"
)

// tcpWorld starts n ranks in this process that rendezvous through a
// shared in-memory store and talk over loopback TCP, as separate hosts
// would.
func tcpWorld(t testing.TB, n int, opts comm.Options) []*comm.Comm {
	t.Helper()
	store := rendezvous.NewMemStore()
	w := make([]*comm.Comm, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() {
			o := opts
			o.Rank, o.Size, o.Store, o.Transport.ListenHost = i, n, store, "127.0.0.1"
			o.Getenv = func(string) string { return "" }
			w[i], errs[i] = comm.Init(ctx, o)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeAll(w)
			t.Fatalf("rank %d: Init: %v", i, err)
		}
	}
	t.Cleanup(func() { closeAll(w) })
	return w
}

func closeAll(w []*comm.Comm) {
	for _, c := range w {
		if c != nil {
			c.Close()
		}
	}
}
