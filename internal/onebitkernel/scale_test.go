package onebitkernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// dispatches are the ways compressScale can run on this CPU.
func dispatches() []struct {
	name string
	run  func(func())
} {
	return []struct {
		name string
		run  func(func())
	}{
		{"dispatch", func(fn func()) { fn() }},
		{"AVX2", withAVX2},
		{"Go", withGo},
	}
}

// TestCompressScaleMatchesIndexOrder: on random inputs of every tail
// length, with ±0, NaN, infinities and subnormals, CompressScale gives the
// bits of Scale over the index-order sum, and Compress's signs, through
// every kernel; on finite inputs of moderate size the bound settles the
// scale without the index-order sum.
func TestCompressScaleMatchesIndexOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, wl := range lengths() {
		w, l := wl[0], wl[1]
		for trial := range 4 {
			vals := randomValues
			if trial%2 == 0 {
				vals = finiteValues
			}
			x, e := vals(rng, l), vals(rng, w)
			wantBits := make([]byte, w/8)
			want := Scale(compressGo(x, e, wantBits, 0, 0), w)
			for _, d := range dispatches() {
				name := fmt.Sprintf("w=%d/l=%d/%d/%s", w, l, trial, d.name)
				bits := make([]byte, w/8)
				var got float32
				var exact bool
				d.run(func() { got, exact = compressScale(x, e, bits) })
				if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
					t.Fatalf("%s: scale %v (index-order sum formed: %v), want %v", name, got, exact, want)
				}
				if string(bits) != string(wantBits) {
					t.Fatalf("%s: signs %x, want %x", name, bits, wantBits)
				}
				if finite := !math.IsInf(float64(want), 0) && want == want; trial%2 == 0 && w > 0 && finite && exact {
					t.Errorf("%s: the bound did not settle a scale of finite values (%v)", name, want)
				}
			}
		}
	}
}

// TestCompressScaleAtRoundingBoundary builds sums whose index-order value
// has a root exactly halfway between two float32 values (rounded to the
// even one) while the same squares added in another order land above it:
// squares of 2^-27 are below half a unit of a sum near 1, so the index
// order drops every one of them, and partial sums keep them. A scale read
// from the unordered sum would be one float32 unit too high; the bound
// must see that it cannot decide, and form the index-order sum.
func TestCompressScaleAtRoundingBoundary(t *testing.T) {
	for _, tiny := range []int{63, 1000, 4096, 1 << 16} {
		w := (4 + tiny + 7) &^ 7
		x := make([]float32, w)
		// squares: 1 + 2*2^-24 + 2^-48 = (1 + 2^-24)^2, then 2^-54 each
		x[0], x[1], x[2], x[3] = 1, 0x1p-12, 0x1p-12, 0x1p-24
		for j := 4; j < 4+tiny; j++ {
			x[j] = 0x1p-27
		}
		e := make([]float32, w)
		sum := compressGo(x, e, make([]byte, w/8), 0, 0)
		if sum != 1+0x1p-23+0x1p-48 {
			t.Fatalf("tiny=%d: index-order sum %b, want (1+2^-24)^2", tiny, sum)
		}
		if root := float32(math.Sqrt(sum)); root != 1 {
			t.Fatalf("tiny=%d: the root %v should round (to even) to 1", tiny, root)
		}
		want := Scale(sum, w)
		for _, d := range dispatches() {
			var got float32
			var exact bool
			var approx float64
			d.run(func() {
				approx = compressApprox(x, e, make([]byte, w/8))
				got, exact = compressScale(x, e, make([]byte, w/8))
			})
			if naive := float32(math.Sqrt(approx)); naive == 1 {
				t.Errorf("tiny=%d/%s: the unordered sum %b rounds as the index-order one: the case is not tested", tiny, d.name, approx)
			}
			if math.Float32bits(got) != math.Float32bits(want) || !exact {
				t.Errorf("tiny=%d/%s: scale %v (index-order sum formed: %v), want %v", tiny, d.name, got, exact, want)
			}
		}
	}
}

// TestApproxWithinBound: the unordered sum of every kernel stays within
// the bound scale.go proves from, on inputs whose index-order sum loses
// the most (many squares of similar size, then tiny ones).
func TestApproxWithinBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{64, 4096, 1 << 18} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(1 + rng.Float64())
			if i > n/2 {
				x[i] = float32(rng.Float64() * 0x1p-20)
			}
		}
		e := make([]float32, n)
		s := compressGo(x, e, make([]byte, n/8), 0, 0)
		for _, d := range dispatches() {
			var a float64
			d.run(func() { a = compressApprox(x, e, make([]byte, n/8)) })
			if diff, bound := math.Abs(a-s), approxError(a, n); diff > bound {
				t.Errorf("n=%d/%s: unordered %v, index order %v: differ by %g, bound %g", n, d.name, a, s, diff, bound)
			}
		}
	}
}

// TestCompressScaleLengths: CompressScale checks lengths as Compress does.
func TestCompressScaleLengths(t *testing.T) {
	if _, err := CompressScale(make([]float32, 9), make([]float32, 8), make([]byte, 1)); err == nil {
		t.Fatal("x longer than e: no error")
	}
	if _, err := CompressScale(nil, make([]float32, 8), make([]byte, 2)); err == nil {
		t.Fatal("len(bits) != len(e)/8: no error")
	}
}
