//go:build linux && !gocomm_portable

package onebitkernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBlockKernelIsTheChain checks the AVX2 block kernel on its own,
// block by block, from random running sums: whenever S + k*u stays in S's binade
// it must be exactly what the additions one after another give. It also
// wants blocks with ties to be summed (not only refused), and refusals
// for leaving the binade, so the test cannot pass on a kernel that always
// falls back or never has to decide a tie.
func TestBlockKernelIsTheChain(t *testing.T) {
	if !useAVX2 {
		t.Skip("no vector kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	var used, withTies, crossed int
	for trial := range 4000 {
		m := 8 * (1 + rng.IntN(64))
		d := distributions[3+rng.IntN(5)] // ties, ties-narrow, powers, ones, short mantissas
		x, e := make([]float32, m), make([]float32, m)
		d.fill(rng, x)
		d.fill(rng, e)
		if trial%2 == 0 {
			clear(e)
		}
		total := plainSum(x, e)
		if total == 0 {
			continue
		}
		// A start above the block's own sum by 1 to 2^24 times, with
		// few significant bits in half the trials (both parities),
		// or as large as the block's sum in a fifth.
		start := math.Ldexp(1+rng.Float64()/2, math.Ilogb(total)+1+rng.IntN(24))
		if trial%2 == 0 {
			start = math.Ldexp(float64(1+rng.IntN(16)), math.Ilogb(total)+rng.IntN(24))
		}
		if trial%5 == 0 { // about the block's own sum: it often leaves the binade
			start = math.Ldexp(1+rng.Float64(), math.Ilogb(total)-rng.IntN(2))
		}
		want := compressGo(x, e, make([]byte, m/8), 0, start)
		invU, u, limit, ok := binade(start)
		if !ok {
			t.Fatalf("binade(%v) not ok", start)
		}
		bits := make([]byte, m/8)
		kk := unitsAVX2(x, e, bits, 0, m, invU, math.Float64bits(start)&1)
		next := start + kk*u
		if !(next < limit) {
			crossed++
			if want < limit {
				t.Fatalf("trial %d: block refused (k=%v) but the chain stays in the binade: %v < %v", trial, kk, want, limit)
			}
			continue
		}
		used++
		if string(bits) != string(plainSigns(x, e)) {
			t.Fatalf("trial %d: signs %x, want %x", trial, bits, plainSigns(x, e))
		}
		if countTies(x, e, start) > 0 {
			withTies++
		}
		if math.Float64bits(next) != math.Float64bits(want) {
			t.Fatalf("trial %d: block sum %v (k=%v u=%v from %v), one after another %v", trial, next, kk, u, start, want)
		}
	}
	t.Logf("blocks summed in units %d (%d of them deciding ties), leaving the binade %d", used, withTies, crossed)
	if withTies < 100 || used-withTies < 100 || crossed < 100 {
		t.Fatalf("the test did not reach every case: summed %d, with ties %d, crossed %d", used, withTies, crossed)
	}
}

// countTies counts the additions of the chain from start whose exact
// result lies halfway between two neighbouring float64 values.
func countTies(x, e []float32, s float64) int {
	n := 0
	for j := range e {
		b := x[j] + e[j]
		t := float64(b) * float64(b)
		next := s + t
		if _, u, _, ok := binade(s); ok && next < 2*math.Ldexp(1, math.Ilogb(s)) {
			if y := t / u; y-math.Floor(y) == 0.5 {
				n++
			}
		}
		s = next
	}
	return n
}

// TestTiesOnlyInOddBinades checks the claim the even-binade kernel rests
// on: a float32 square is never exactly half a unit of a sum in [2^p,
// 2^(p+1)) with p even, and is in some with p odd (so the check is not
// vacuous), over random values of every magnitude, subnormals included.
func TestTiesOnlyInOddBinades(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	oddTies := 0
	for range 200_000 {
		b := math.Float32frombits(rng.Uint32()&^(1<<31|0xff<<23) | uint32(rng.IntN(255))<<23) // finite
		if rng.IntN(3) == 0 {
			b = math.Float32frombits(math.Float32bits(b) &^ (1<<uint(rng.IntN(24)) - 1)) // trailing zeros
		}
		q := float64(b) * float64(b)
		if q == 0 {
			continue
		}
		// the binades where q is a fraction of a unit but not below 2^-52 of it
		for p := math.Ilogb(q) + 1; p <= math.Ilogb(q)+53 && p < 1023; p++ {
			invU := math.Ldexp(1, 52-p)
			y := q * invU
			if y-math.Floor(y) != 0.5 {
				continue
			}
			if p%2 == 0 || !tiesPossible(invU) {
				t.Fatalf("%v^2 = %v is a tie in the binade 2^%d (tiesPossible %v)", b, q, p, tiesPossible(invU))
			}
			oddTies++
		}
	}
	if oddTies == 0 {
		t.Fatal("no ties at all: the test is not looking")
	}
	for _, p := range []int{-900, -3, -2, 0, 1, 2, 51, 52, 53, 900} {
		if want := p%2 != 0; tiesPossible(math.Ldexp(1, 52-p)) != want {
			t.Errorf("tiesPossible for p = %d: %v, want %v", p, !want, want)
		}
	}
	t.Logf("%d ties, all in odd binades", oddTies)
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
