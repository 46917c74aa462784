package rendezvous

import (
	"context"
	"testing"
)

func benchmarkStore(b *testing.B, s Store) {
	ctx := context.Background()
	value := make([]byte, 64)
	b.Run("Set", func(b *testing.B) {
		for b.Loop() {
			if err := s.Set(ctx, "bench/k", value); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "bench/k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Add", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Add(ctx, "bench/n", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMemStore(b *testing.B) {
	s := NewMemStore()
	defer s.Close()
	benchmarkStore(b, s)
}

func BenchmarkTCPStore(b *testing.B) {
	srv, err := ListenTCPStore("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	s, err := DialTCPStore(context.Background(), srv.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchmarkStore(b, s)
}

func BenchmarkFileStore(b *testing.B) {
	if !fileStoreSupported {
		b.Skip("no flock(2) on this platform")
	}
	s, err := NewFileStore(b.TempDir() + "/store")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchmarkStore(b, s)
}
