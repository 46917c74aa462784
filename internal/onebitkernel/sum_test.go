package onebitkernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// plainSum is the definition written out once more, apart from the
// package's loops: b = x + e with x padded by +0, and the float64 squares
// added one after another in index order.
func plainSum(x, e []float32) float64 {
	var s float64
	for j := range e {
		var xj float32
		if j < len(x) {
			xj = x[j]
		}
		b := xj + e[j]
		s += float64(float64(b) * float64(b))
	}
	return s
}

// plainSigns packs the signs the way the definition says.
func plainSigns(x, e []float32) []byte {
	bits := make([]byte, len(e)/8)
	for j := range e {
		var xj float32
		if j < len(x) {
			xj = x[j]
		}
		if !(xj+e[j] < 0) {
			bits[j/8] |= 0x80 >> (j % 8)
		}
	}
	return bits
}

// A distribution fills v with values of one kind.
type distribution struct {
	name string
	fill func(rng *rand.Rand, v []float32)
}

func signed32(rng *rand.Rand, f float64) float32 {
	if rng.IntN(2) == 0 {
		f = -f
	}
	return float32(f)
}

// distributions are the kinds of input the sum tests draw: ordinary data,
// values built to make ties (few significant bits: their squares are
// exact halves of the sum's unit often), powers of two, mixed, tiny,
// huge and special values.
var distributions = []distribution{
	{"uniform", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(2*rng.Float64() - 1)
		}
	}},
	{"normal", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}},
	{"normal-gradient", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 1e-3)
		}
	}},
	{"ties", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = signed32(rng, math.Ldexp(float64(1+rng.IntN(7)), rng.IntN(24)-12))
		}
	}},
	{"ties-narrow", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = signed32(rng, math.Ldexp(float64(1+2*rng.IntN(2)), rng.IntN(3)))
		}
	}},
	{"powers-of-two", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = signed32(rng, math.Ldexp(1, rng.IntN(40)-20))
		}
	}},
	{"ones", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = signed32(rng, 1)
		}
	}},
	{"short-mantissa", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = signed32(rng, math.Ldexp(float64(rng.IntN(1<<12)), rng.IntN(20)-30))
		}
	}},
	{"mixed-magnitudes", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(120)-60)))
		}
	}},
	{"growing", func(rng *rand.Rand, v []float32) { // a big value late: the sum leaves its binade mid-block
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Ldexp(1, i/64))
		}
	}},
	{"tiny", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = signed32(rng, math.Ldexp(float64(1+rng.IntN(1<<10)), -149+rng.IntN(40)))
		}
	}},
	{"huge", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Ldexp(1, 100+rng.IntN(27)))
		}
	}},
	{"zeros", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = 0
			if rng.IntN(50) == 0 {
				v[i] = signed32(rng, rng.Float64())
			}
		}
	}},
	{"special", func(rng *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			if rng.IntN(200) == 0 {
				v[i] = specialValues[rng.IntN(len(specialValues))]
			}
		}
	}},
}

// sumInputs returns x (possibly shorter than e) and e of w elements drawn
// from the two distributions.
func sumInputs(rng *rand.Rand, dx, de distribution, w int) (x, e []float32) {
	l := w
	if w > 0 && rng.IntN(4) == 0 {
		l = w - rng.IntN(min(w, 20)+1)
	}
	x, e = make([]float32, l), make([]float32, w)
	dx.fill(rng, x)
	de.fill(rng, e)
	if rng.IntN(3) == 0 { // errors much smaller than the values, as in training
		for i := range e {
			e[i] *= 1.0 / 64
		}
	}
	return x, e
}

// checkSum runs Compress as dispatched, with the AVX-512 kernels off and
// with every vector kernel off, and wants the plain loop's sum and signs, bit for bit.
func checkSum(t *testing.T, name string, x, e []float32) {
	t.Helper()
	want, wantBits := plainSum(x, e), plainSigns(x, e)
	modes := []struct {
		name string
		with func(func())
	}{
		{"as dispatched", func(fn func()) { fn() }},
		{"AVX2", withAVX2},
		{"Go", withGo},
	}
	for _, mode := range modes {
		bits := make([]byte, len(e)/8)
		var got float64
		var err error
		mode.with(func() { got, err = Compress(x, e, bits) })
		if err != nil {
			t.Fatal(err)
		}
		if !sameSum(got, want) || string(bits) != string(wantBits) {
			t.Fatalf("%s (%s; AVX2 %v, AVX-512 %v): Compress = %v (%#x), the plain loop %v (%#x); signs equal: %v", name, mode.name, useAVX2, useAVX512, got, math.Float64bits(got), want, math.Float64bits(want), string(bits) == string(wantBits))
		}
	}
}

// TestSumMatchesPlainLoop compares the sums with the plain loop on every
// pair of distributions, at every length up to 2000 in turn and a few
// long ones.
func TestSumMatchesPlainLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	w := 0
	for _, dx := range distributions {
		for _, de := range distributions {
			for range 3 {
				w = (w + 8*(1+rng.IntN(5))) % 2008
				x, e := sumInputs(rng, dx, de, w)
				checkSum(t, fmt.Sprintf("%s+%s/w=%d/l=%d", dx.name, de.name, w, len(x)), x, e)
			}
		}
	}
	for w := 0; w <= 2000; w += 8 {
		dx, de := distributions[rng.IntN(len(distributions))], distributions[rng.IntN(len(distributions))]
		x, e := sumInputs(rng, dx, de, w)
		checkSum(t, fmt.Sprintf("%s+%s/w=%d/l=%d", dx.name, de.name, w, len(x)), x, e)
	}
	long := []int{1 << 16, 100_008, 1 << 20}
	if testing.Short() {
		long = long[:1]
	}
	for _, w := range long {
		for _, d := range []distribution{distributions[1], distributions[3], distributions[4], distributions[8]} {
			x, e := sumInputs(rng, d, d, w)
			checkSum(t, fmt.Sprintf("%s/w=%d/l=%d", d.name, w, len(x)), x, e)
		}
	}
}

// TestSumTieConstruction builds a stretch whose every square is a tie:
// after the first elements S = 2^53 + 2 (u = 2, S' odd), and each 1*1 =
// u/2 rounds S up once to even and never again. Summing the block with
// ties to even regardless of S would give S unchanged; with the parity
// ignored the other way, S + 1024.
func TestSumTieConstruction(t *testing.T) {
	x := make([]float32, 8192)
	x[0], x[1], x[2] = 1<<26, 1<<26, 1.5
	for i := 4096; i < len(x); i++ {
		x[i] = 1
	}
	e := make([]float32, len(x))
	if want := plainSum(x, e); want != 1<<53+4 {
		t.Fatalf("the construction is off: the plain loop sums to %v, want 2^53+4", want)
	}
	checkSum(t, "all ties", x, e)
}

// FuzzSumSquares wants Compress's sum and signs, with and without the
// vector kernels, to be the plain loop's on arbitrary bits: x from the first
// half of data, e from the second.
func FuzzSumSquares(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x80, 0x7f}, uint16(3))
	tie := make([]byte, 4*2*300)
	for i := 0; i < len(tie); i += 4 {
		copy(tie[i:], []byte{0, 0, 0x80, 0x3f}) // 1.0
	}
	f.Add(tie, uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, repeat uint16) {
		v := floatsOf(data)
		// repeat tiles the values, so short inputs still make long sums
		for range min(int(repeat), 64) {
			if len(v) > 0 && len(v) < 1<<12 {
				v = append(v, v...)
			}
		}
		w := (len(v) / 2) &^ 7
		x, e := v[:len(v)-w], v[len(v)-w:]
		x = x[:min(len(x), w)]
		checkSum(t, "fuzz", x, e)
	})
}
