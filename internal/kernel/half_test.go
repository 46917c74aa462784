package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// halfCodec bundles a format with the conversions under test.
type halfCodec struct {
	f      halfFormat
	widen  func(uint16) float32
	narrow func(float32) uint16
}

var halfCodecs = []halfCodec{
	{fmtF16, F16ToF32, F32ToF16},
	{fmtBF16, BF16ToF32, F32ToBF16},
}

// TestHalfRoundTripExhaustive widens every 16-bit pattern, checks the value
// against the field-by-field reference and narrows it back: numbers,
// infinities and zeros return to the same bits; NaNs stay NaN and come back
// quiet with the payload otherwise kept.
func TestHalfRoundTripExhaustive(t *testing.T) {
	for _, c := range halfCodecs {
		t.Run(c.f.name, func(t *testing.T) {
			quiet := uint16(1) << (c.f.mant - 1)
			for i := range 1 << 16 {
				h := uint16(i)
				f := c.widen(h)
				want := refHalfToF64(h, c.f)
				back := c.narrow(f)
				if c.f.isNaN(h) {
					fb := math.Float32bits(f)
					if !math.IsNaN(float64(f)) || fb&f32QuietBit == 0 || math.Signbit(float64(f)) != (h&0x8000 != 0) {
						t.Fatalf("widen(%#04x) = %#08x, want a quiet NaN of the same sign", h, fb)
					}
					if back != h|quiet {
						t.Fatalf("narrow(widen(%#04x)) = %#04x, want %#04x", h, back, h|quiet)
					}
					continue
				}
				if float64(f) != want || math.Signbit(float64(f)) != math.Signbit(want) {
					t.Fatalf("widen(%#04x) = %v, want %v", h, f, want)
				}
				if back != h {
					t.Fatalf("narrow(widen(%#04x)) = %#04x", h, back)
				}
			}
		})
	}
}

// TestF16TableMatchesF16ToF32 checks the reduce loops' widening table
// against the scalar conversion, bit for bit.
func TestF16TableMatchesF16ToF32(t *testing.T) {
	tab := f16Table()
	for i := range 1 << 16 {
		if got, want := math.Float32bits(tab[i]), math.Float32bits(F16ToF32(uint16(i))); got != want {
			t.Fatalf("table[%#04x] = %#08x, want %#08x", i, got, want)
		}
	}
}

// TestScalarConversionsDoNotAllocate guards the stack-only wrappers.
func TestScalarConversionsDoNotAllocate(t *testing.T) {
	var sink uint16
	allocs := testing.AllocsPerRun(100, func() {
		sink ^= F32ToF16(F16ToF32(sink^0x3c00) + 1)
		sink ^= F32ToBF16(BF16ToF32(sink) * 2)
	})
	if allocs != 0 {
		t.Errorf("conversions allocate %v times per run", allocs)
	}
}

// narrowingInputs returns float32 values that probe rounding: for every
// pair of adjacent non-negative values of format f (the largest finite one
// paired with the overflow threshold), the lower value, the midpoint and
// the float32 values just either side of the midpoint, all in both signs;
// plus float32 specials and random bit patterns.
func narrowingInputs(rng *rand.Rand, f halfFormat, random int) []float32 {
	var in []float32
	add := func(v float32) { in = append(in, v, -v) }
	maxFinite := f.expMask() - 1
	for h := uint16(0); h <= maxFinite; h++ {
		lo := refHalfToF64(h, f)
		var hi float64
		if h == maxFinite {
			hi = math.Ldexp(1, f.emax+1) // where infinity would sit
		} else {
			hi = refHalfToF64(h+1, f)
		}
		mid := float32((lo + hi) / 2) // exact: one more bit than f has
		add(float32(lo))
		add(mid)
		add(math.Nextafter32(mid, 0))
		add(math.Nextafter32(mid, float32(math.Inf(1))))
	}
	for _, b := range []uint32{0x7f800000, 0x7f800001, 0x7fc00000, 0x7fffffff, 0x7f7fffff,
		0x00000001, 0x007fffff, 0x00800000, 0x33000000, 0x33000001, 0x32ffffff, 0x477fefff, 0x477ff000} {
		add(math.Float32frombits(b))
	}
	for range random {
		in = append(in, math.Float32frombits(rng.Uint32()))
	}
	return in
}

// TestNarrowingRoundsToNearestEven checks F32ToF16 and F32ToBF16 against
// the float64 reference rounding on boundary and random inputs.
func TestNarrowingRoundsToNearestEven(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range halfCodecs {
		t.Run(c.f.name, func(t *testing.T) {
			bad := 0
			for _, v := range narrowingInputs(rng, c.f, 200_000) {
				got := c.narrow(v)
				want := refRoundHalf(float64(v), c.f)
				if math.IsNaN(float64(v)) {
					if !c.f.isQuietNaN(got) || (got&0x8000 != 0) != math.Signbit(float64(v)) {
						t.Errorf("narrow(%#08x) = %#04x, want a quiet NaN of the same sign", math.Float32bits(v), got)
						bad++
					}
				} else if got != want {
					t.Errorf("narrow(%g = %#08x) = %#04x, want %#04x", v, math.Float32bits(v), got, want)
					bad++
				}
				if bad > 10 {
					t.Fatal("too many failures")
				}
			}
		})
	}
}

// TestNarrowingKnownValues pins a few hand-checked roundings.
func TestNarrowingKnownValues(t *testing.T) {
	tests := []struct {
		in       float32
		f16, bf1 uint16
	}{
		{0, 0x0000, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{1, 0x3c00, 0x3f80},
		{65504, 0x7bff, 0x4780},           // bfloat16 has 8 bits: rounds up to 65536
		{65519.996, 0x7bff, 0x4780},       // just below the float16 overflow threshold
		{65520, 0x7c00, 0x4780},           // ties to even: overflows to +Inf
		{0x1p-24, 0x0001, 0x3380},         // smallest float16 subnormal
		{0x1p-25, 0x0000, 0x3300},         // tie with 0 and 2^-24: even is 0
		{0x1.8p-24, 0x0002, 0x33c0},       // tie between 1 and 2 steps: even is 2
		{1 + 0x1p-11, 0x3c00, 0x3f80},     // float16 tie: even is 1
		{1 + 0x3p-11, 0x3c02, 0x3f80},     // float16 tie: even is 1+2^-9
		{1 + 0x1p-8, 0x3c04, 0x3f80},      // bfloat16 tie: even is 1
		{1 + 0x3p-8, 0x3c0c, 0x3f82},      // bfloat16 tie: even is 1+2^-6
		{math.MaxFloat32, 0x7c00, 0x7f80}, // rounds to +Inf in bfloat16 too
		{-math.MaxFloat32, 0xfc00, 0xff80},
		{float32(math.Inf(-1)), 0xfc00, 0xff80},
	}
	for _, tt := range tests {
		if got := F32ToF16(tt.in); got != tt.f16 {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", tt.in, got, tt.f16)
		}
		if got := F32ToBF16(tt.in); got != tt.bf1 {
			t.Errorf("F32ToBF16(%g) = %#04x, want %#04x", tt.in, got, tt.bf1)
		}
	}
}

// FuzzNarrowing compares both narrowing conversions with the reference on
// arbitrary float32 bit patterns.
func FuzzNarrowing(f *testing.F) {
	for _, b := range []uint32{0, 0x80000000, 0x7f800000, 0x7fc00001, 0x477ff000, 0x33000000, 0x3f808000} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint32) {
		v := math.Float32frombits(b)
		for _, c := range halfCodecs {
			got := c.narrow(v)
			if math.IsNaN(float64(v)) {
				if !c.f.isQuietNaN(got) {
					t.Fatalf("%s narrow(%#08x) = %#04x, want a quiet NaN", c.f.name, b, got)
				}
				continue
			}
			if want := refRoundHalf(float64(v), c.f); got != want {
				t.Fatalf("%s narrow(%#08x) = %#04x, want %#04x", c.f.name, b, got, want)
			}
		}
	})
}
