package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocomm/comm/core"
)

var benchSizes = []struct {
	name  string
	bytes int
}{
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
	{"64MiB", 64 << 20},
}

// benchBuffers returns aligned dst and src of n bytes holding finite,
// moderate values of dt, so the float paths run their common case.
func benchBuffers(dt core.DType, n int) (dst, src []byte) {
	rng := rand.New(rand.NewPCG(9, 10))
	dst, src = Alloc(n), Alloc(n)
	size := dt.Size()
	// Generate 64 KiB of values and tile them: generating 64 MiB one
	// element at a time would dominate the benchmark's run time.
	pattern := min(n, 64<<10)
	for i := 0; i < pattern; i += size {
		storeUint(dst[i:], size, nearOne(rng, dt))
		storeUint(src[i:], size, nearOne(rng, dt))
	}
	for i := pattern; i < n; i += pattern {
		copy(dst[i:], dst[:pattern])
		copy(src[i:], src[:pattern])
	}
	return dst, src
}

// BenchmarkReduce measures Reduce on aligned buffers; compare its MB/s with
// BenchmarkCopy's (the memory system's ceiling).
func BenchmarkReduce(b *testing.B) {
	cases := []struct {
		dt core.DType
		op core.Op
	}{
		{core.Float32, core.Sum},
		{core.Float64, core.Sum},
		{core.Int32, core.Sum},
		{core.Float16, core.Sum},
		{core.BFloat16, core.Sum},
		{core.Float32, core.Max},
	}
	for _, c := range cases {
		for _, s := range benchSizes {
			b.Run(fmt.Sprintf("%v/%v/%s", c.dt, c.op, s.name), func(b *testing.B) {
				dst, src := benchBuffers(c.dt, s.bytes)
				b.SetBytes(int64(s.bytes))
				b.ResetTimer()
				for range b.N {
					if err := Reduce(c.dt, c.op, dst, src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReduceMisaligned measures the portable path (buffers one byte
// off alignment).
func BenchmarkReduceMisaligned(b *testing.B) {
	for _, dt := range []core.DType{core.Float32, core.Float16} {
		b.Run(fmt.Sprintf("%v/Sum/1MiB", dt), func(b *testing.B) {
			dst, src := benchBuffers(dt, 1<<20+8)
			dst, src = dst[1:1+1<<20], src[1:1+1<<20]
			b.SetBytes(1 << 20)
			b.ResetTimer()
			for range b.N {
				if err := Reduce(dt, core.Sum, dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCopy is the builtin copy at the same sizes, for comparison.
func BenchmarkCopy(b *testing.B) { benchCopy(b, func(dst, src []byte) { copy(dst, src) }) }

// BenchmarkCopyShared is CopyShared at the same sizes: against
// BenchmarkCopy, what bypassing the cache saves (the read of each
// destination line before it is written) and costs (the destination is
// not left in the cache).
func BenchmarkCopyShared(b *testing.B) { benchCopy(b, CopyShared) }

func benchCopy(b *testing.B, copyFn func(dst, src []byte)) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			dst, src := Alloc(s.bytes), Alloc(s.bytes)
			b.SetBytes(int64(s.bytes))
			b.ResetTimer()
			for range b.N {
				copyFn(dst, src)
			}
		})
	}
}
