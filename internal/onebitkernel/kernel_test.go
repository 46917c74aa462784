package onebitkernel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// specialValues are the inputs where the sign rule and the padding matter.
var specialValues = []float32{
	0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1, -1,
}

// randomValues returns n values, mostly moderate, a quarter of them special.
func randomValues(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		if rng.IntN(4) == 0 {
			v[i] = specialValues[rng.IntN(len(specialValues))]
		} else {
			v[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		}
	}
	return v
}

// finiteValues is randomValues without NaN and infinities (whose sums of
// squares would hide every other difference).
func finiteValues(rng *rand.Rand, n int) []float32 {
	v := randomValues(rng, n)
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || math.Abs(float64(x)) > 1e30 {
			v[i] = float32(rng.NormFloat64())
		}
	}
	return v
}

// sameFloats reports the first index where a and b differ in bits (any
// NaN matches any NaN: which operand's payload an addition keeps is the
// hardware's and the compiler's choice), or -1.
func sameFloats(a, b []float32) int {
	for i := range a {
		x, y := a[i], b[i]
		if math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
			return i
		}
	}
	return -1
}

// sameSum is sameFloats for one float64.
func sameSum(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

// lengths are element counts of e (multiples of 8) and of x (up to e's),
// around the vector kernels' block.
func lengths() [][2]int {
	var ls [][2]int
	for _, w := range []int{0, 8, 16, 24, 64, 72, 256, 1000, 4104} {
		for _, l := range []int{w, w - 1, w - 7, w - 8, w - 9, w / 2, 1, 0} {
			if l >= 0 && l <= w {
				ls = append(ls, [2]int{w, l})
			}
		}
	}
	return ls
}

// withGo runs fn with the vector kernels off.
func withGo(fn func()) {
	saved, saved512 := useAVX2, useAVX512
	useAVX2, useAVX512 = false, false
	defer func() { useAVX2, useAVX512 = saved, saved512 }()
	fn()
}

// withAVX2 runs fn with the AVX-512 kernels off (the AVX2 ones as the CPU
// allows).
func withAVX2(fn func()) {
	saved := useAVX512
	useAVX512 = false
	defer func() { useAVX512 = saved }()
	fn()
}

// TestVectorMatchesGo runs every kernel through its dispatch (vector where
// the CPU has it) and through the Go loops alone, on the same random
// inputs with ±0, NaN, infinities and subnormals, at lengths that leave
// every kind of tail, and wants the same bits.
func TestVectorMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no vector kernels on this CPU: the Go loops are all there is")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, wl := range lengths() {
		w, l := wl[0], wl[1]
		for trial := range 4 {
			name := fmt.Sprintf("w=%d/l=%d/%d", w, l, trial)
			vals := randomValues
			if trial%2 == 0 {
				vals = finiteValues
			}
			x, e := vals(rng, l), vals(rng, w)
			scale := vals(rng, 1)[0]

			bitsV, bitsG, bits2 := make([]byte, w/8), make([]byte, w/8), make([]byte, w/8)
			sumV := compress(x, e, bitsV)
			var sumG, sum2 float64
			withGo(func() { sumG = compress(x, e, bitsG) })
			withAVX2(func() { sum2 = compress(x, e, bits2) })
			if !sameSum(sumV, sumG) || !sameSum(sum2, sumG) {
				t.Fatalf("%s: Compress sum %v (vector, AVX-512 %v), %v (AVX2) vs %v (Go)", name, sumV, useAVX512, sum2, sumG)
			}
			if string(bitsV) != string(bitsG) || string(bits2) != string(bitsG) {
				t.Fatalf("%s: Compress signs %x (vector), %x (AVX2) vs %x (Go)", name, bitsV, bits2, bitsG)
			}

			eV, eG := append([]float32(nil), e...), append([]float32(nil), e...)
			updateError(x, eV, bitsV, scale, -scale)
			withGo(func() { updateError(x, eG, bitsG, scale, -scale) })
			if i := sameFloats(eV, eG); i >= 0 {
				t.Fatalf("%s: UpdateError at %d: %v (vector) vs %v (Go)", name, i, eV[i], eG[i])
			}

			dV, dG := make([]float32, l), make([]float32, l)
			unpack(dV, bitsV, scale, -scale)
			withGo(func() { unpack(dG, bitsG, scale, -scale) })
			if i := sameFloats(dV, dG); i >= 0 {
				t.Fatalf("%s: Unpack at %d: %v (vector) vs %v (Go)", name, i, dV[i], dG[i])
			}

			aV, aG := append([]float32(nil), x...), append([]float32(nil), x...)
			unpackAdd(aV, bitsV, scale, -scale)
			withGo(func() { unpackAdd(aG, bitsG, scale, -scale) })
			if i := sameFloats(aV, aG); i >= 0 {
				t.Fatalf("%s: UnpackAdd at %d: %v (vector) vs %v (Go)", name, i, aV[i], aG[i])
			}
		}
	}
}

// TestCompressDefinition checks the exported kernels against the rules
// written out element by element: the sign rule, MSB-first packing, the
// +0 padding, the index-order float64 sum, and the error update.
func TestCompressDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, wl := range lengths() {
		w, l := wl[0], wl[1]
		x, e := finiteValues(rng, l), finiteValues(rng, w)
		bits := make([]byte, w/8)
		sum, err := Compress(x, e, bits)
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		b := make([]float32, w)
		for j := range w {
			var xj float32 // the padding is +0, added
			if j < l {
				xj = x[j]
			}
			b[j] = xj + e[j]
			want += float64(b[j]) * float64(b[j])
			bit := bits[j/8] >> (7 - j%8) & 1
			if wantBit := byte(1); b[j] < 0 && bit != 0 || !(b[j] < 0) && bit != wantBit {
				t.Fatalf("w=%d l=%d: element %d = %v packed as %d", w, l, j, b[j], bit)
			}
		}
		if !sameSum(sum, want) {
			t.Fatalf("w=%d l=%d: sum of squares %v, want %v (index order)", w, l, sum, want)
		}
		scale := Scale(sum, max(w, 1))
		if err := UpdateError(x, e, bits, scale); err != nil {
			t.Fatal(err)
		}
		for j := range w {
			s := scale
			if b[j] < 0 {
				s = -scale
			}
			if got, want := e[j], b[j]-s; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("w=%d l=%d: new error %d = %v, want %v", w, l, j, got, want)
			}
		}
	}
}

// TestPackingOrder pins the wire layout: element 8k+i is bit 7-i of byte
// k, 1 for +1; +0, -0 and NaN are +1; the padding's +0 turns a -0 error
// into +0.
func TestPackingOrder(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	x := []float32{1, -1, 0, negZero, nan, -2, 3, -4, -1, -1, -1, -1, -1, -1, -1, 1}
	e := make([]float32, 24)
	e[20] = negZero // past x: b = +0 + -0 = +0
	e[21] = -5
	bits := make([]byte, 3)
	if _, err := Compress(x, e, bits); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0b1011_1010, 0b0000_0001, 0b1111_1011}; string(bits) != string(want) {
		t.Fatalf("signs %08b, want %08b", bits, want)
	}
	if err := UpdateError(x, e, bits, 0); err != nil {
		t.Fatal(err)
	}
	if math.Signbit(float64(e[20])) {
		t.Fatalf("padded -0 error stayed -0: the padding must be added as +0")
	}
	out := make([]float32, 13)
	if err := Unpack(out, bits, 2); err != nil {
		t.Fatal(err)
	}
	want := []float32{2, -2, 2, 2, 2, -2, 2, -2, -2, -2, -2, -2, -2}
	if i := sameFloats(out, want); i >= 0 {
		t.Fatalf("Unpack %v, want %v", out, want)
	}
}

// TestLengthErrors: bad lengths are errors, and nothing is written.
func TestLengthErrors(t *testing.T) {
	bits := []byte{0xAA, 0xAA}
	cases := []struct {
		name string
		err  error
	}{
		{"e not a multiple of 8", func() error { _, err := Compress(nil, make([]float32, 12), bits); return err }()},
		{"bits too short", func() error { _, err := Compress(nil, make([]float32, 24), bits); return err }()},
		{"x longer than e", func() error { return UpdateError(make([]float32, 17), make([]float32, 16), bits, 1) }()},
		{"dst longer than the signs", func() error { return Unpack(make([]float32, 17), bits, 1) }()},
		{"dst longer than the signs (add)", func() error { return UnpackAdd(make([]float32, 17), bits, 1) }()},
	}
	for _, c := range cases {
		if !errors.Is(c.err, ErrLength) {
			t.Errorf("%s: err = %v, want ErrLength", c.name, c.err)
		}
	}
	if bits[0] != 0xAA || bits[1] != 0xAA {
		t.Errorf("a failed call wrote the signs: %x", bits)
	}
}
