package rendezvous_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/gocomm/comm/rendezvous"
)

// Four ranks meet through a TCP store hosted by rank 0: each publishes its
// address, counts itself in, and reads its right neighbour's address.
func ExampleNewTCPStore() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 4
	master, err := rendezvous.NewTCPStore(ctx, "127.0.0.1:0", true) // rank 0
	if err != nil {
		log.Fatal(err)
	}
	defer master.Close() // also stops the server

	peers := make([]string, size)
	var wg sync.WaitGroup
	for rank := range size {
		wg.Go(func() {
			st := rendezvous.Store(master)
			if rank != 0 { // the other ranks dial MASTER_ADDR:MASTER_PORT
				s, err := rendezvous.NewTCPStore(ctx, master.Addr(), false)
				if err != nil {
					log.Fatal(err)
				}
				defer s.Close()
				st = s
			}
			addr := fmt.Sprintf("10.0.0.%d:7000", rank+1)
			if err := st.Set(ctx, fmt.Sprintf("addr/%d", rank), []byte(addr)); err != nil {
				log.Fatal(err)
			}
			if _, err := st.Add(ctx, "joined", 1); err != nil {
				log.Fatal(err)
			}
			right, err := st.Get(ctx, fmt.Sprintf("addr/%d", (rank+1)%size)) // blocks until set
			if err != nil {
				log.Fatal(err)
			}
			peers[rank] = string(right)
		})
	}
	wg.Wait()
	joined, _ := master.Get(ctx, "joined")
	fmt.Println("joined:", string(joined))
	fmt.Println("rank 3 sends to", peers[3])
	// Output:
	// joined: 4
	// rank 3 sends to 10.0.0.1:7000
}

// CompareAndSet elects a leader: the first rank to swap the empty value
// wins, the others learn who did.
func ExampleStore_compareAndSet() {
	ctx := context.Background()
	st := rendezvous.NewMemStore()
	defer st.Close()
	for _, candidate := range []string{"rank-2", "rank-0", "rank-1"} {
		leader, err := st.CompareAndSet(ctx, "leader", nil, []byte(candidate))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s sees leader %s\n", candidate, leader)
	}
	// Output:
	// rank-2 sees leader rank-2
	// rank-0 sees leader rank-2
	// rank-1 sees leader rank-2
}

// A prefix store gives each restart of a job its own namespace in one store.
func ExampleNewPrefixStore() {
	ctx := context.Background()
	base := rendezvous.NewMemStore()
	defer base.Close()
	attempt0 := rendezvous.NewPrefixStore("attempt_0", base)
	attempt1 := rendezvous.NewPrefixStore("attempt_1", base)
	attempt0.Set(ctx, "addr/0", []byte("old"))
	attempt1.Set(ctx, "addr/0", []byte("new"))
	v, _ := base.Get(ctx, "attempt_1/addr/0")
	fmt.Println(string(v))
	// Output: new
}

// A rank meets the others of job 42 in an etcd cluster that no rank hosts:
// it publishes its address on its own lease (gone soon after the rank
// dies) and counts itself in on the job's. (Not run: it needs etcd.)
func ExampleNewEtcdStore() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rank, size = 1, 4
	st, err := rendezvous.NewEtcdStore(ctx, []string{"etcd1:2379", "etcd2:2379", "etcd3:2379"}, "/gocomm/job-42",
		rendezvous.WithLeaseTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.SetLeased(ctx, fmt.Sprintf("live/%d", rank), []byte("10.0.0.2:7000")); err != nil {
		log.Fatal(err)
	}
	if _, err := st.Add(ctx, "joined", 1); err != nil {
		log.Fatal(err)
	}
	peer, err := st.Get(ctx, fmt.Sprintf("live/%d", (rank+1)%size)) // blocks until rank 2 is up
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank 2 is at %s\n", peer)
}
