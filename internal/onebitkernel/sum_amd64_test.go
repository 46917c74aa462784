//go:build linux && !gocomm_portable

package onebitkernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tieHeavy returns n values with few significant bits (small integers
// times powers of two) mixed with random ones and zeros: their squares
// land exactly halfway between units of the running sum's last place
// often, and their sizes make the sum cross binades.
func tieHeavy(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch rng.IntN(4) {
		case 0:
			v[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(60)-30)))
		case 1:
			v[i] = 0
		default:
			v[i] = float32(math.Ldexp(float64(1+rng.IntN(3)), rng.IntN(50)-40))
			if rng.IntN(2) == 0 {
				v[i] = -v[i]
			}
		}
	}
	return v
}

// TestBlockSumIsTheChain checks the claim compress rests on, block by
// block: whenever compressBlockAVX2 reports no tie and the sum stays in
// its binade, S + k*u is exactly what the additions one after another
// give. It also wants both outcomes to occur, so the test cannot pass on
// a kernel that always falls back.
func TestBlockSumIsTheChain(t *testing.T) {
	if !useAVX2 {
		t.Skip("no vector kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	var used, ties, crossed int
	for trial := range 3000 {
		m := 8 * (1 + rng.IntN(64))
		x, e := tieHeavy(rng, m), tieHeavy(rng, m)
		bits := make([]byte, m/8)
		// A start above the block's own sum, by 1 to 2^24 times, so that
		// the block usually stays in the start's binade.
		total := compressGo(x, e, make([]byte, m/8), 0, 0)
		if total == 0 || math.IsInf(total, 0) {
			continue
		}
		start := math.Ldexp(1+rng.Float64()/2, math.Ilogb(total)+1+rng.IntN(24))
		if trial%3 == 0 { // few significant bits: ties likelier
			start = math.Ldexp(float64(1+rng.IntN(8)), math.Ilogb(total)+rng.IntN(24))
		}
		want := compressGo(x, e, make([]byte, m/8), 0, start)
		invU, u, limit, ok := binade(start)
		if !ok {
			t.Fatalf("binade(%v) not ok", start)
		}
		k, tie := compressBlockAVX2(&x[0], &e[0], &bits[0], m, invU)
		next := start + float64(k*u)
		switch {
		case tie != 0:
			ties++
		case !(next < limit):
			crossed++
		default:
			used++
			if math.Float64bits(next) != math.Float64bits(want) {
				t.Fatalf("trial %d: block sum %v (k=%v u=%v from %v), one after another %v", trial, next, k, u, start, want)
			}
		}
	}
	t.Logf("blocks summed in lanes %d, with ties %d, leaving the binade %d", used, ties, crossed)
	if used == 0 || ties == 0 || crossed == 0 {
		t.Fatalf("the test did not reach every case: summed %d, ties %d, crossed %d", used, ties, crossed)
	}
}

// TestCompressLongSums compares the dispatched Compress with the Go loop
// on long tie-heavy inputs, where many blocks take each path.
func TestCompressLongSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 20 {
		w := 8 * (1000 + rng.IntN(20000))
		x, e := tieHeavy(rng, w-rng.IntN(20)), tieHeavy(rng, w)
		if trial%2 == 0 {
			x, e = finiteValues(rng, w), finiteValues(rng, w)
		}
		bv, bg := make([]byte, w/8), make([]byte, w/8)
		sv, sg := compress(x, e, bv), compressGo(x, e, bg, 0, 0)
		if math.Float64bits(sv) != math.Float64bits(sg) || string(bv) != string(bg) {
			t.Fatalf("trial %d (w=%d): sum %v vs Go %v", trial, w, sv, sg)
		}
	}
}

func TestBinade(t *testing.T) {
	for _, s := range []float64{1, 1.5, 3, 1e300, 1e-290, math.Ldexp(1, -969), math.Ldexp(1.9, 1021)} {
		invU, u, limit, ok := binade(s)
		if !ok {
			t.Fatalf("binade(%v) not ok", s)
		}
		if math.Nextafter(s, math.Inf(1))-s != u && s < math.Ldexp(1, 1023) {
			t.Errorf("binade(%v): u = %v, want %v", s, u, math.Nextafter(s, math.Inf(1))-s)
		}
		if invU*u != 1 || limit <= s || limit/2 > s {
			t.Errorf("binade(%v) = %v, %v, %v", s, invU, u, limit)
		}
	}
	for _, s := range []float64{0, -1, math.Inf(1), math.NaN(), math.SmallestNonzeroFloat64, math.MaxFloat64} {
		if _, _, _, ok := binade(s); ok {
			t.Errorf("binade(%v) ok", s)
		}
	}
}

// TestCompressTieNeedsTheChain builds a second block whose every square is
// a tie: after the first block S = 2^53 + 2 (u = 2, S/u odd), and each
// 1*1 = u/2 then rounds S up once to even and never again. Summing the
// block in lanes would give S unchanged; compress must notice the ties
// and add one after another.
func TestCompressTieNeedsTheChain(t *testing.T) {
	x := make([]float32, 2*sumBlock)
	x[0], x[1], x[2] = 1<<26, 1<<26, 1.5
	for i := sumBlock; i < len(x); i++ {
		x[i] = 1
	}
	e := make([]float32, len(x))
	bits := make([]byte, len(x)/8)
	want := compressGo(x, e, bits, 0, 0)
	if want != 1<<53+4 {
		t.Fatalf("the construction is off: the Go loop sums to %v, want 2^53+4", want)
	}
	if got := compress(x, e, bits); got != want {
		t.Fatalf("compress = %v, want %v (2^53+4)", got, want)
	}
}
