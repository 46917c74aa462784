package transport

import (
	"context"
	"fmt"
	"testing"
)

func benchWorld(b *testing.B, name string, cfg worldConfig) []Endpoint {
	for _, im := range impls {
		if im.name == name {
			return im.build(b, 2, cfg)
		}
	}
	b.Fatalf("no implementation %q", name)
	return nil
}

// BenchmarkPingPong measures a round trip of an 8-byte message between two
// endpoints in one process; hop-us is half of it.
func BenchmarkPingPong(b *testing.B) {
	for _, name := range []string{"inproc", "tcp"} {
		b.Run(name+"/8B", func(b *testing.B) {
			pingPong(b, benchWorld(b, name, worldConfig{}), 8)
		})
	}
}

// BenchmarkBandwidth streams messages one way with the receive posted
// ahead (the zero-copy path); MB/s is the payload rate.
func BenchmarkBandwidth(b *testing.B) {
	for _, name := range []string{"inproc", "tcp"} {
		for _, size := range []int{1 << 20, 64 << 20} {
			b.Run(fmt.Sprintf("%s/%dMiB", name, size>>20), func(b *testing.B) {
				eps := benchWorld(b, name, worldConfig{})
				ctx := context.Background()
				// depth receives stay posted (rotating tags), so each
				// message usually finds its buffer waiting.
				const depth = 4
				hdr := func(i int) Header { return Header{Comm: 1, Tag: uint64(i % depth), Sig: sig(uint64(size))} }
				src := make([]byte, size)
				var dst [depth][]byte
				for k := range dst {
					dst[k] = make([]byte, size)
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
			})
		}
	}
}
