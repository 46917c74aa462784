package transport

import (
	"context"
	"fmt"
	"testing"
)

// shmBenchWorld is a 2-rank world for benchmarks: "tcp" (TCP only) or
// "shm" (shared memory with the default ring sizes).
func shmBenchWorld(b *testing.B, name string, so SHMOptions) []Endpoint {
	b.Helper()
	mode := TransportSHM
	if name == "tcp" {
		mode = TransportTCP
	}
	ws, err := connectHybridWorld(2, func(o *HybridOptions) {
		o.Prefix = b.Name()
		o.Transport = mode
		o.HostID = "bench-host"
		o.SHM = so
	})
	if err != nil {
		b.Fatal(err)
	}
	eps := []Endpoint{ws[0], ws[1]}
	b.Cleanup(func() { closeAll(eps) })
	return eps
}

// BenchmarkHybridPingPong measures an 8-byte round trip between two
// endpoints in this process, over shared memory and over TCP, in the same
// run; hop-us is half a round trip.
func BenchmarkHybridPingPong(b *testing.B) {
	for _, name := range []string{"shm", "tcp"} {
		b.Run(name+"/8B", func(b *testing.B) {
			eps := shmBenchWorld(b, name, SHMOptions{})
			pingPong(b, eps, 8)
		})
	}
}

func pingPong(b *testing.B, eps []Endpoint, size int) {
	ctx := context.Background()
	h := Header{Comm: 1, Tag: 1, Sig: sig(uint64(size))}
	ping, pong := make([]byte, size), make([]byte, size)
	done := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := eps[1].Recv(ctx, 0, h, pong); err != nil {
				done <- err
				return
			}
			if err := eps[1].Send(ctx, 0, h, pong); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ResetTimer()
	for range b.N {
		if err := eps[0].Send(ctx, 1, h, ping); err != nil {
			b.Fatal(err)
		}
		if _, err := eps[0].Recv(ctx, 1, h, ping); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2/1000, "hop-us")
}

// BenchmarkHybridBandwidth streams messages one way with receives posted
// ahead, over shared memory and over TCP; MB/s is the payload rate.
func BenchmarkHybridBandwidth(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		for _, name := range []string{"shm", "tcp"} {
			b.Run(fmt.Sprintf("%s/%dMiB", name, size>>20), func(b *testing.B) {
				eps := shmBenchWorld(b, name, SHMOptions{})
				stream(b, eps, size)
			})
		}
	}
}

func stream(b *testing.B, eps []Endpoint, size int) {
	ctx := context.Background()
	const depth = 2
	hdr := func(i int) Header { return Header{Comm: 1, Tag: uint64(i % depth), Sig: sig(uint64(size))} }
	src := touched(size)
	var dst [depth][]byte
	for k := range dst {
		dst[k] = touched(size)
	}
	done := make(chan error, depth)
	for k := range depth {
		go func() {
			for i := k; i < b.N; i += depth {
				if _, err := eps[1].Recv(ctx, 0, hdr(i), dst[k]); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := range b.N {
		if err := eps[0].Send(ctx, 1, hdr(i), src); err != nil {
			b.Fatal(err)
		}
	}
	for range depth {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHybridOverhead sends and then receives an 8-byte message on
// one goroutine: the CPU cost of a send plus a receive, without waiting.
func BenchmarkHybridOverhead(b *testing.B) {
	for _, name := range []string{"shm", "tcp"} {
		b.Run(name+"/8B", func(b *testing.B) {
			eps := shmBenchWorld(b, name, SHMOptions{})
			ctx := context.Background()
			h := Header{Comm: 1, Seq: 3, Tag: 1, Sig: sig(8)}
			buf := make([]byte, 8)
			b.ReportAllocs()
			for b.Loop() {
				if err := eps[0].Send(ctx, 1, h, buf); err != nil {
					b.Fatal(err)
				}
				if _, err := eps[1].Recv(ctx, 0, h, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkInprocOverhead(b *testing.B) {
	eps := NewInprocWorld(2, InprocOptions{})
	ctx := context.Background()
	h := Header{Comm: 1, Seq: 3, Tag: 1, Sig: sig(8)}
	buf := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		if err := eps[0].Send(ctx, 1, h, buf); err != nil {
			b.Fatal(err)
		}
		if _, err := eps[1].Recv(ctx, 0, h, buf); err != nil {
			b.Fatal(err)
		}
	}
}
