//go:build linux && !gocomm_portable

package onebitkernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// runKernel is one of the AVX-512 run kernels with its group size and the
// parity of the binades it takes (p odd: ties).
type runKernel struct {
	name  string
	group int
	odd   bool
	run   func(x, e []float32, bits []byte, m int, start float64) (int, int64, bool)
}

var runKernels = []runKernel{
	{"even", 32, false, func(x, e []float32, bits []byte, m int, start float64) (int, int64, bool) {
		s0, budget, _, _ := runArgs(start)
		return compressRunEvenAVX512(&x[0], &e[0], &bits[0], m, s0, budget)
	}},
	{"even64", 64, false, func(x, e []float32, bits []byte, m int, start float64) (int, int64, bool) {
		s0, budget, _, _ := runArgs(start)
		return compressRunEven64AVX512(&x[0], &e[0], &bits[0], m, s0, budget)
	}},
	{"odd32", 32, true, func(x, e []float32, bits []byte, m int, start float64) (int, int64, bool) {
		s0, budget, h, parity := runArgs(start)
		return compressRunOddAVX512(&x[0], &e[0], &bits[0], m, s0, budget, h, parity)
	}},
	{"odd64", 64, true, func(x, e []float32, bits []byte, m int, start float64) (int, int64, bool) {
		s0, budget, h, parity := runArgs(start)
		return compressRunOdd64AVX512(&x[0], &e[0], &bits[0], m, s0, budget, h, parity)
	}},
}

// runArgs are a run kernel's arguments for a running sum start, as sumRuns
// forms them.
func runArgs(start float64) (s0 uint64, budget int64, h float32, parity uint64) {
	s := math.Float64bits(start)
	h, _ = tieScale(s >> 52)
	return s >> 52 << 52, int64(1<<52 - s&(1<<52-1)), h, s & 1
}

// TestRunKernelsAreTheChain checks each AVX-512 run kernel on its own from
// random running sums: the elements it says it did must sum, one after
// another, to exactly start + k units with the same signs; where it stopped
// early, the next 32 elements must really take the sum out of its binade
// (the kernels of 64 try a group's first half alone); where
// it reports !ok, a square must be NaN or infinite. It also wants runs
// that decide ties, runs that stop and runs that go to the end, so that it
// cannot pass on a kernel that always stops or never meets a tie.
func TestRunKernelsAreTheChain(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU")
	}
	for _, kern := range runKernels {
		t.Run(kern.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(51, uint64(kern.group)))
			var full, stopped, halves, withTies, notOK int
			for trial := range 3000 {
				m := kern.group * (1 + rng.IntN(24))
				d := distributions[rng.IntN(len(distributions))]
				x, e := make([]float32, m), make([]float32, m)
				d.fill(rng, x)
				d.fill(rng, e)
				if trial%2 == 0 {
					clear(e)
				}
				total := plainSum(x, e)
				if total == 0 || math.IsNaN(total) || math.IsInf(total, 0) {
					if trial%7 != 0 {
						continue
					}
					total = 1 // a NaN or infinity now and then: the kernel must say !ok or stop
				}
				// a start from about the block's own sum (it often leaves
				// the binade) to 2^24 times above it, with few significant
				// bits in half the trials (both parities of S')
				start := math.Ldexp(1+rng.Float64(), math.Ilogb(total)-rng.IntN(2)+rng.IntN(25))
				if trial%2 == 0 {
					start = math.Ldexp(float64(1+rng.IntN(16)), math.Ilogb(total)+rng.IntN(24))
				}
				if p := math.Ilogb(start); (p%2 != 0) != kern.odd {
					start *= 2
				}
				if e := math.Float64bits(start) >> 52; e == 0 || e >= 2047 {
					continue
				}
				if _, ok := tieScale(math.Float64bits(start) >> 52); kern.odd && !ok {
					continue
				}
				bits := make([]byte, m/8)
				done, k, ok := kern.run(x, e, bits, m, start)
				if !ok {
					if !hasNonFinite(x, e) {
						t.Fatalf("trial %d: !ok without a NaN or infinity among the values", trial)
					}
					notOK++
					continue
				}
				// every kernel stops at a multiple of 32 (the kernels of
				// 64 try the first half of a group that does not fit)
				if done%32 != 0 || done > m || done < 0 {
					t.Fatalf("trial %d: done = %d of %d", trial, done, m)
				}
				want := compressGo(x[:done], e[:done], make([]byte, done/8), 0, start)
				got := math.Float64frombits(math.Float64bits(start) + uint64(k))
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("trial %d (%s, %d of %d from %v): kernel sum %v (k=%d), one after another %v", trial, d.name, done, m, start, got, k, want)
				}
				if string(bits[:done/8]) != string(plainSigns(x[:done], e[:done])) {
					t.Fatalf("trial %d: signs %x, want %x", trial, bits[:done/8], plainSigns(x[:done], e[:done]))
				}
				if done < m {
					next := compressGo(x[:done+32], e[:done+32], make([]byte, done/8+4), 0, start)
					if math.Float64bits(next)>>52 == math.Float64bits(start)>>52 {
						t.Fatalf("trial %d: stopped at %d of %d, but the next group leaves the sum in its binade (%v from %v)", trial, done, m, next, start)
					}
					stopped++
					if done%64 == 32 {
						halves++ // a kernel of 64 kept the first half of a group
					}
				} else {
					full++
				}
				if kern.odd && countTies(x[:done], e[:done], start) > 0 {
					withTies++
				}
			}
			t.Logf("full runs %d, stopped %d (after half a group %d), with ties %d, !ok %d", full, stopped, halves, withTies, notOK)
			if full < 100 || stopped < 100 || (kern.odd && withTies < 100) || (kern.group == 64 && halves < 30) {
				t.Fatalf("the test did not reach every case: full %d, stopped %d, after half a group %d, with ties %d", full, stopped, halves, withTies)
			}
		})
	}
}

// hasNonFinite reports whether some b = x + e is a NaN or infinite, or
// has a square that is.
func hasNonFinite(x, e []float32) bool {
	for j := range e {
		b := float64(x[j] + e[j])
		if math.IsNaN(b*b) || math.IsInf(b*b, 0) {
			return true
		}
	}
	return false
}

// TestRunDecidesTiesBothWays builds a run in an odd binade where every
// element is a tie and the parity before each alternates with an odd unit
// between them, so a kernel that rounds every tie down, or ignores the
// start's parity, or the units between ties, gets a different sum.
func TestRunDecidesTiesBothWays(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU")
	}
	// S = 2^53 + 2 (p = 53, u = 2): 1*1 = u/2 is a tie; 2*2 = 4 = 2u is two
	// units, 3*3 = 9 = 4.5u a tie, sqrt(2)-ish values are not exact: use
	// b = 2 (even units) and b = 1, 3 (ties), b = 0 (nothing).
	pattern := []float32{1, 3, 2, 1, 0, 3, 1, 1}
	for _, kern := range runKernels {
		if !kern.odd {
			continue
		}
		for _, start := range []float64{1<<53 + 2, 1<<53 + 4, 1<<53 + 6} {
			x := make([]float32, 256)
			for i := range x {
				x[i] = pattern[i%len(pattern)]
			}
			e := make([]float32, len(x))
			bits := make([]byte, len(x)/8)
			done, k, ok := kern.run(x, e, bits, len(x), start)
			want := compressGo(x, e, make([]byte, len(x)/8), 0, start)
			if !ok || done != len(x) || math.Float64frombits(math.Float64bits(start)+uint64(k)) != want {
				t.Fatalf("%s from %v: done %d ok %v sum %v, want %v", kern.name, start, done, ok, math.Float64frombits(math.Float64bits(start)+uint64(k)), want)
			}
			if countTies(x, e, start) < 100 {
				t.Fatalf("the construction has %d ties", countTies(x, e, start))
			}
		}
	}
}

// TestRunRefusesNaN puts a NaN with its sign bit set (whose bits, read as
// an integer, are negative and would hide from the budget) among ones:
// every kernel must report !ok or stop before the NaN's group.
func TestRunRefusesNaN(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU")
	}
	for _, kern := range runKernels {
		for _, at := range []int{0, 5, 70, 200} {
			x := make([]float32, 256)
			for i := range x {
				x[i] = 1
			}
			x[at] = math.Float32frombits(0xffc00000)
			e := make([]float32, len(x))
			start := math.Ldexp(1, 60)
			if kern.odd {
				start *= 2
			}
			done, _, ok := kern.run(x, e, make([]byte, len(x)/8), len(x), start)
			if ok && done > at {
				t.Fatalf("%s: NaN at %d, but ok with %d elements done", kern.name, at, done)
			}
		}
	}
}

// TestRunTiesAcrossGroups builds runs in the odd binade of S = 2^53 + 2j
// (u = 2) from values whose squares are exact: 1 and 3 are ties (y = 1/2,
// 9/2), 1.5 and 2.5 add an odd count of units without a tie (y = 9/8,
// 25/8), 2 an even one (y = 2), 0 nothing. Each group of 64 is drawn to
// have no tie at all, a tie only at its first or its last element, many,
// or nothing but ties (a fuzz input found that case wrong once): so a tie's choice depends on parities carried over whole groups
// without ties, across a group's edge, and from the start's parity, and a
// kernel that skips or misplaces any of them gets a different sum.
func TestRunTiesAcrossGroups(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	plain := []float32{0, 1.5, 2, 2.5}
	ties := []float32{1, 3}
	for _, kern := range runKernels {
		if !kern.odd {
			continue
		}
		var decided int
		for trial := range 400 {
			groups := 1 + rng.IntN(6)
			x := make([]float32, 64*groups)
			for g := range groups {
				v := x[64*g : 64*(g+1)]
				for i := range v {
					v[i] = plain[rng.IntN(len(plain))]
				}
				switch rng.IntN(5) {
				case 4: // every element a tie: the parity after it is c0's last bit
					for i := range v {
						v[i] = ties[rng.IntN(2)]
					}
				case 1:
					v[0] = ties[rng.IntN(2)]
				case 2:
					v[63] = ties[rng.IntN(2)]
				case 3:
					for i := range v {
						if rng.IntN(4) == 0 {
							v[i] = ties[rng.IntN(2)]
						}
					}
				}
				if rng.IntN(2) == 0 {
					for i := range v {
						v[i] = -v[i] // the signs must not matter to the sum
					}
				}
			}
			e := make([]float32, len(x))
			start := float64(1<<53 + 2*rng.IntN(1000))
			bits := make([]byte, len(x)/8)
			done, k, ok := kern.run(x, e, bits, len(x), start)
			want := compressGo(x, e, make([]byte, len(x)/8), 0, start)
			got := math.Float64frombits(math.Float64bits(start) + uint64(k))
			if !ok || done != len(x) || got != want {
				t.Fatalf("%s trial %d: done %d of %d, ok %v, sum %v, want %v (the chain)", kern.name, trial, done, len(x), ok, got, want)
			}
			if string(bits) != string(plainSigns(x, e)) {
				t.Fatalf("%s trial %d: signs %x, want %x", kern.name, trial, bits, plainSigns(x, e))
			}
			decided += countTies(x, e, start)
		}
		if decided < 1000 {
			t.Fatalf("%s: only %d ties decided", kern.name, decided)
		}
	}
}

// TestRunBudgetEdgeWithTies starts the odd binade of 2^53 (u = 2) a few
// hundred units below its end, S = 2^54 - 2B, on values full of ties (as
// in TestRunTiesAcrossGroups), so that whether a group or half a group
// still fits turns on the ties it takes up: a kernel that leaves them out
// of its budget keeps elements whose sum leaves the binade.
func TestRunBudgetEdgeWithTies(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	vals := []float32{1, 3, 1, 3, 2, 1.5, 2.5, 0}
	for _, kern := range runKernels {
		if !kern.odd {
			continue
		}
		var stopped, halves int
		for trial := range 3000 {
			x := make([]float32, 64*(1+rng.IntN(4)))
			for i := range x {
				x[i] = vals[rng.IntN(len(vals))]
			}
			e := make([]float32, len(x))
			b := 1 + rng.IntN(100*len(x)/64)
			start := float64(1<<54 - 2*b)
			bits := make([]byte, len(x)/8)
			done, k, ok := kern.run(x, e, bits, len(x), start)
			if !ok || done%32 != 0 || done > len(x) {
				t.Fatalf("%s trial %d: done %d of %d, ok %v", kern.name, trial, done, len(x), ok)
			}
			want := compressGo(x[:done], e[:done], make([]byte, done/8), 0, start)
			got := math.Float64frombits(math.Float64bits(start) + uint64(k))
			if got != want || got >= 1<<54 {
				t.Fatalf("%s trial %d (B = %d): %d elements sum to %v (k=%d), one after another %v", kern.name, trial, b, done, got, k, want)
			}
			if done < len(x) {
				if next := compressGo(x[:done+32], e[:done+32], make([]byte, done/8+4), 0, start); next < 1<<54 {
					t.Fatalf("%s trial %d (B = %d): stopped at %d, but the next 32 stay in the binade", kern.name, trial, b, done)
				}
				stopped++
				if done%64 == 32 {
					halves++
				}
			}
		}
		if stopped < 500 || (kern.group == 64 && halves < 100) {
			t.Fatalf("%s: the test did not reach the edge: %d stops, %d after half a group", kern.name, stopped, halves)
		}
	}
}
