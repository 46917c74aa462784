package onebitkernel

import (
	"math"
	"testing"
)

// BenchmarkCompressBinade times Compress at 64 KiB with the running sum
// held in one binade for the whole input, beside a copy of the same bytes:
// x[0] puts the sum at about 1.01*2^26 (even: p = 26, no ties possible) or
// 1.01*2^27 (odd: p = 27, ties possible), far above what the other 16383
// squares add, so on CPUs with AVX-512 nearly all of the work is one call
// of the even-binade or of the odd-binade run kernel (run512_amd64.go). On
// normal data at 64 KiB the sum crosses a binade at each doubling and
// about 2/3 of the elements are summed in odd binades; this benchmark
// separates the two kinds of kernel from each other and from the
// crossings. It fails if the sum leaves its binade (the case would then
// not measure what it says). On other CPUs it times whatever Compress
// dispatches to. Run the cases interleaved, e.g.
//
//	go test -run '^$' -bench CompressBinade -count 5 ./internal/onebitkernel
func BenchmarkCompressBinade(b *testing.B) {
	const n = 16 << 10
	x, e, bits, _ := benchInputs(n)
	e2 := append([]float32(nil), e...)
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(4 * n)
		for range b.N {
			copy(e2, x)
		}
	})
	for _, c := range []struct {
		name string
		p    int
	}{{"even", 26}, {"odd", 27}} {
		xs := append([]float32(nil), x...)
		xs[0] = float32(math.Sqrt(1.01 * math.Ldexp(1, c.p)))
		b.Run(c.name, func(b *testing.B) {
			b0 := float64(xs[0] + e[0])
			first, last := math.Ilogb(b0*b0), math.Ilogb(compressGo(xs, e, make([]byte, n/8), 0, 0))
			if first != c.p || last != c.p {
				b.Fatalf("the sum goes from binade 2^%d to 2^%d, not 2^%d throughout", first, last, c.p)
			}
			b.SetBytes(4 * n)
			b.ResetTimer()
			for range b.N {
				compress(xs, e, bits)
			}
		})
	}
}
