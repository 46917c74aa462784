package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/gocomm/comm/core"
)

var (
	allDTypes = []core.DType{
		core.Int8, core.Int16, core.Int32, core.Int64,
		core.Uint8, core.Uint16, core.Uint32, core.Uint64,
		core.Float16, core.BFloat16, core.Float32, core.Float64,
	}
	allOps = []core.Op{
		core.Sum, core.Prod, core.Min, core.Max,
		core.BAnd, core.BOr, core.BXor, core.Avg,
	}
)

// edgeBits returns interesting element bit patterns for dt.
func edgeBits(dt core.DType) []uint64 {
	switch dt {
	case core.Float16:
		return []uint64{0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x7bff, 0xfbff,
			0x0001, 0x8001, 0x03ff, 0x0400, 0x8400, 0x3c00, 0xbc00, 0x3c01, 0x7800, 0x0200}
	case core.BFloat16:
		return []uint64{0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1, 0x7f7f, 0xff7f,
			0x0001, 0x8001, 0x007f, 0x0080, 0x8080, 0x3f80, 0xbf80, 0x3f81, 0x7f00}
	case core.Float32:
		return []uint64{0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
			0xffc00001, 0x7f7fffff, 0xff7fffff, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
			0x80800000, 0x3f800000, 0xbf800000, 0x3f800001, 0x33800000, 0x4b800000}
	case core.Float64:
		return []uint64{0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
			0x7ff0000000000001, 0xfff8000000000001, 0x7fefffffffffffff, 0xffefffffffffffff,
			1, 1<<63 | 1, 0x000fffffffffffff, 0x0010000000000000, 0x3ff0000000000000,
			0xbff0000000000000, 0x3ff0000000000001, 0x3ca0000000000000, 0x4340000000000000}
	}
	w := uint(bitsOf(dt))
	mask := uint64(1)<<w - 1 // for w == 64 the shift gives 0 and this all ones
	top := uint64(1) << (w - 1)
	vals := []uint64{0, 1, mask, 2, mask - 1, top, top - 1, top + 1, 3, 0x55, 0xaa}
	for i := range vals {
		vals[i] &= mask
	}
	return vals
}

// randomBuffers returns dst and src contents of n elements of dt: first
// every pair of edge values, then a mix of random bit patterns, edge values
// and, for floats, values with nearby exponents whose sums round often.
func randomBuffers(rng *rand.Rand, dt core.DType, n int) (dst, src []byte) {
	size := dt.Size()
	dst, src = make([]byte, n*size), make([]byte, n*size)
	edges := edgeBits(dt)
	i := 0
	for _, a := range edges {
		for _, b := range edges {
			if i == n {
				return dst, src
			}
			storeUint(dst[i*size:], size, a)
			storeUint(src[i*size:], size, b)
			i++
		}
	}
	pick := func() uint64 {
		switch r := rng.IntN(10); {
		case r < 2:
			return edges[rng.IntN(len(edges))]
		case r < 6 && dt.IsFloat():
			return nearOne(rng, dt)
		default:
			return rng.Uint64()
		}
	}
	for ; i < n; i++ {
		storeUint(dst[i*size:], size, pick())
		storeUint(src[i*size:], size, pick())
	}
	return dst, src
}

// nearOne returns a float of dt with a random sign and fraction and an
// exponent near 0 (or, sometimes, near the subnormal range).
func nearOne(rng *rand.Rand, dt core.DType) uint64 {
	var f float64
	switch dt {
	case core.Float16:
		f = refHalfToF64(uint16(rng.Uint32()), fmtF16)
	case core.BFloat16:
		f = refHalfToF64(uint16(rng.Uint32()), fmtBF16)
	default:
		f = rng.Float64()
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 1.5
	}
	scale := rng.IntN(8) - 4
	if rng.IntN(8) == 0 {
		scale -= 14 // binary16's subnormal range, still normal for the others
	}
	f = math.Ldexp(1+math.Abs(f)-math.Floor(math.Abs(f)), scale)
	if rng.IntN(2) == 0 {
		f = -f
	}
	switch dt {
	case core.Float16:
		return uint64(refRoundHalf(f, fmtF16))
	case core.BFloat16:
		return uint64(refRoundHalf(f, fmtBF16))
	case core.Float32:
		return uint64(math.Float32bits(float32(f)))
	default:
		return math.Float64bits(f)
	}
}

// checkSame reports elements where got differs from want. Floats match when
// their bits are equal or both are NaN; a 16-bit NaN result must be quiet.
func checkSame(t *testing.T, dt core.DType, got, want, inA, inB []byte, what string) {
	t.Helper()
	size := dt.Size()
	bad := 0
	for i := 0; i < len(want); i += size {
		g, w := loadUint(got[i:], size), loadUint(want[i:], size)
		if isNaNBits(dt, w) && acceptableNaN(dt, g) || !isNaNBits(dt, w) && g == w {
			continue
		}
		bad++
		if bad <= 5 {
			a, b := loadUint(inA[i:], size), loadUint(inB[i:], size)
			t.Errorf("%s: element %d: op(%#x, %#x) = %#x, want %#x", what, i/size, a, b, g, w)
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements differ in all", what, bad)
	}
}

// isNaNBits reports whether the element bit pattern v of dt is a NaN.
func isNaNBits(dt core.DType, v uint64) bool {
	switch dt {
	case core.Float16:
		return fmtF16.isNaN(uint16(v))
	case core.BFloat16:
		return fmtBF16.isNaN(uint16(v))
	case core.Float32:
		return math.IsNaN(float64(math.Float32frombits(uint32(v))))
	case core.Float64:
		return math.IsNaN(math.Float64frombits(v))
	}
	return false
}

// acceptableNaN reports whether v is a NaN a kernel may produce: any NaN
// for float32/float64 (the hardware's choice), a quiet one for the 16-bit
// formats (our conversions quiet them).
func acceptableNaN(dt core.DType, v uint64) bool {
	switch dt {
	case core.Float16:
		return fmtF16.isQuietNaN(uint16(v))
	case core.BFloat16:
		return fmtBF16.isQuietNaN(uint16(v))
	}
	return isNaNBits(dt, v)
}

// placement puts a buffer at a byte offset from an 8-byte aligned address.
type placement struct{ dstOff, srcOff int }

var placements = []placement{{0, 0}, {1, 1}, {1, 2}, {0, 3}, {2, 0}, {4, 4}}

// placed copies b into fresh memory starting off bytes past 8-byte alignment.
func placed(b []byte, off int) []byte {
	buf := Alloc(len(b) + off + 8)[off : off+len(b)]
	copy(buf, b)
	return buf
}

func TestReduceMatchesReference(t *testing.T) {
	// 2600 elements of 8 bytes cross the portable path's 2 KiB chunks, and
	// 600 cross reduceF16's 256-element blocks.
	lengths := []int{0, 1, 7, 8, 9, 17, 600, 2600}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !op.ValidFor(dt) {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				for _, n := range lengths {
					a, b := randomBuffers(rng, dt, n)
					want := refReduce(dt, op, a, b)
					for _, p := range placements {
						dst, src := placed(a, p.dstOff), placed(b, p.srcOff)
						if err := Reduce(dt, op, dst, src); err != nil {
							t.Fatalf("n=%d %+v: %v", n, p, err)
						}
						checkSame(t, dt, dst, want, a, b, fmt.Sprintf("n=%d %+v", n, p))
						if !bytes.Equal(src[:len(b)], b) {
							t.Fatalf("n=%d %+v: src was modified", n, p)
						}
					}
					// dst and src may be the same slice.
					same := placed(a, 0)
					if err := Reduce(dt, op, same, same); err != nil {
						t.Fatal(err)
					}
					checkSame(t, dt, same, refReduce(dt, op, a, a), a, a, fmt.Sprintf("n=%d dst==src", n))
				}
			})
		}
	}
}

// TestReduceToMatchesReduce: ReduceTo gives exactly what copying a and
// reducing b into it gives, over pieces (20000 elements cross several of
// its 16 KiB pieces), with dst apart from a or equal to it; a and b are
// left alone, and bad lengths and ops fail as Reduce fails.
func TestReduceToMatchesReduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !op.ValidFor(dt) {
				if err := ReduceTo(dt, op, make([]byte, 8), make([]byte, 8), make([]byte, 8)); !errors.Is(err, ErrUnsupported) {
					t.Errorf("%v %v: %v, want ErrUnsupported", dt, op, err)
				}
				continue
			}
			for _, n := range []int{0, 1, 9, 20000} {
				a, b := randomBuffers(rng, dt, n)
				want := append([]byte(nil), a...)
				if err := Reduce(dt, op, want, b); err != nil {
					t.Fatal(err)
				}
				a0, b0 := append([]byte(nil), a...), append([]byte(nil), b...)
				dst := make([]byte, len(a))
				if err := ReduceTo(dt, op, dst, a, b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, want) || !bytes.Equal(a, a0) || !bytes.Equal(b, b0) {
					t.Fatalf("%v %v n=%d: ReduceTo differs from copy and Reduce, or changed its inputs", dt, op, n)
				}
				if err := ReduceTo(dt, op, a, a, b); err != nil || !bytes.Equal(a, want) {
					t.Fatalf("%v %v n=%d: ReduceTo into a: %v", dt, op, n, err)
				}
			}
		}
	}
	if err := ReduceTo(core.Float32, core.Sum, make([]byte, 8), make([]byte, 4), make([]byte, 8)); !errors.Is(err, ErrLength) {
		t.Errorf("short a: %v", err)
	}
	if err := ReduceTo(core.Float32, core.Sum, make([]byte, 8), make([]byte, 8), make([]byte, 4)); !errors.Is(err, ErrLength) {
		t.Errorf("short b: %v", err)
	}
}

// TestReduceAllMatchesReduce: ReduceAll gives exactly what copying the
// first source and reducing the others into it in order would, for 1-5
// sources, and leaves them alone.
func TestReduceAllMatchesReduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !op.ValidFor(dt) {
				if err := ReduceAll(dt, op, make([]byte, 8), [][]byte{make([]byte, 8)}); !errors.Is(err, ErrUnsupported) {
					t.Errorf("%v %v: %v, want ErrUnsupported", dt, op, err)
				}
				continue
			}
			for _, n := range []int{0, 1, 9, 20000} {
				for k := 1; k <= 5; k++ {
					var srcs, orig [][]byte
					for range k {
						a, _ := randomBuffers(rng, dt, n)
						srcs, orig = append(srcs, a), append(orig, append([]byte(nil), a...))
					}
					want := append([]byte(nil), srcs[0]...)
					for _, src := range srcs[1:] {
						if err := Reduce(dt, op, want, src); err != nil {
							t.Fatal(err)
						}
					}
					dst := make([]byte, len(want))
					if err := ReduceAll(dt, op, dst, srcs); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(dst, want) {
						t.Fatalf("%v %v n=%d, %d sources: ReduceAll differs from copy and Reduce", dt, op, n, k)
					}
					for i := range srcs {
						if !bytes.Equal(srcs[i], orig[i]) {
							t.Fatalf("%v %v n=%d: ReduceAll changed source %d", dt, op, n, i)
						}
					}
				}
			}
		}
	}
	if err := ReduceAll(core.Float32, core.Sum, make([]byte, 8), [][]byte{make([]byte, 8), make([]byte, 4)}); !errors.Is(err, ErrLength) {
		t.Errorf("short source: %v", err)
	}
	if err := ReduceAll(core.Float32, core.Sum, make([]byte, 8), nil); !errors.Is(err, ErrLength) {
		t.Errorf("no sources: %v", err)
	}
	if err := ReduceAll(core.Float32, core.Sum, make([]byte, 6), [][]byte{make([]byte, 6)}); !errors.Is(err, ErrLength) {
		t.Errorf("6 bytes of float32: %v", err)
	}
}

// TestReduceAllOutMatchesReduceAll: ReduceAllOut writes exactly
// ReduceAll's result to both of its outputs, for 1-4 sources, lengths
// across the piece it works in, outputs aligned and not for its stores
// around the cache, with the bypass on and off; it writes nothing else and
// leaves its sources alone.
func TestReduceAllOutMatchesReduceAll(t *testing.T) {
	defer SetCacheBypass(CacheBypass())
	rng := rand.New(rand.NewPCG(7, 8))
	for _, bypass := range []bool{true, false} {
		SetCacheBypass(bypass)
		for _, dt := range allDTypes {
			for _, op := range allOps {
				if !op.ValidFor(dt) {
					if err := ReduceAllOut(dt, op, make([]byte, 8), make([]byte, 8), [][]byte{make([]byte, 8), make([]byte, 8)}); !errors.Is(err, ErrUnsupported) {
						t.Errorf("%v %v: %v, want ErrUnsupported", dt, op, err)
					}
					continue
				}
				for _, n := range []int{0, 1, 9, 20000} {
					for k := 1; k <= 4; k++ {
						var srcs, orig [][]byte
						for range k {
							a, _ := randomBuffers(rng, dt, n)
							srcs, orig = append(srcs, a), append(orig, append([]byte(nil), a...))
						}
						want := make([]byte, n*dt.Size())
						if err := ReduceAll(dt, op, want, srcs); err != nil {
							t.Fatal(err)
						}
						for _, off := range []int{0, dt.Size()} {
							buf, obuf := Alloc(len(want)+off+64), Alloc(len(want)+off+64)
							dst, out := buf[off:off+len(want)], obuf[off:off+len(want)]
							if err := ReduceAllOut(dt, op, dst, out, srcs); err != nil {
								t.Fatal(err)
							}
							if !bytes.Equal(dst, want) || !bytes.Equal(out, want) {
								t.Fatalf("bypass %v, %v %v n=%d, %d sources, offset %d: ReduceAllOut differs from ReduceAll", bypass, dt, op, n, k, off)
							}
							for _, b := range append(append(buf[:off:off], buf[off+len(want):]...), append(obuf[:off:off], obuf[off+len(want):]...)...) {
								if b != 0 {
									t.Fatalf("bypass %v, %v %v n=%d, offset %d: wrote outside dst or out", bypass, dt, op, n, off)
								}
							}
							for i := range srcs {
								if !bytes.Equal(srcs[i], orig[i]) {
									t.Fatalf("%v %v n=%d: ReduceAllOut changed source %d", dt, op, n, i)
								}
							}
						}
					}
				}
			}
		}
	}
	// out may be one of the sources (a shared all-reduce in place writes
	// the peer's result over the peer's input).
	for k := 2; k <= 4; k++ {
		for alias := range k {
			var srcs [][]byte
			for range k {
				a, _ := randomBuffers(rng, core.Float32, 20000)
				srcs = append(srcs, a)
			}
			want := make([]byte, len(srcs[0]))
			if err := ReduceAll(core.Float32, core.Sum, want, srcs); err != nil {
				t.Fatal(err)
			}
			dst := Alloc(len(want))
			if err := ReduceAllOut(core.Float32, core.Sum, dst, srcs[alias], srcs); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, want) || !bytes.Equal(srcs[alias], want) {
				t.Fatalf("%d sources, out is source %d: results differ from ReduceAll", k, alias)
			}
		}
	}
	two := [][]byte{make([]byte, 8), make([]byte, 8)}
	if err := ReduceAllOut(core.Float32, core.Sum, make([]byte, 8), make([]byte, 4), two); !errors.Is(err, ErrLength) {
		t.Errorf("short out: %v", err)
	}
	if err := ReduceAllOut(core.Float32, core.Sum, make([]byte, 8), make([]byte, 8), [][]byte{make([]byte, 8), make([]byte, 4)}); !errors.Is(err, ErrLength) {
		t.Errorf("short source: %v", err)
	}
	if err := ReduceAllOut(core.Float32, core.Sum, make([]byte, 8), make([]byte, 8), nil); !errors.Is(err, ErrLength) {
		t.Errorf("no sources: %v", err)
	}
	if err := ReduceAllOut(core.Float32, core.Sum, make([]byte, 6), make([]byte, 6), [][]byte{make([]byte, 6), make([]byte, 6)}); !errors.Is(err, ErrLength) {
		t.Errorf("6 bytes of float32: %v", err)
	}
}

func TestDivideMatchesReference(t *testing.T) {
	divisors := []int{2, 3, 7, 8, 10, 127, 128, 129, 255, 256, 1000, 65537, 1 << 24, 1<<24 + 1, 1<<31 - 1}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range allDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			a, _ := randomBuffers(rng, dt, 700)
			for _, n := range append([]int{1}, divisors...) {
				want := refDivide(dt, a, n)
				for _, off := range []int{0, 1, 2} {
					buf := placed(a, off)
					if err := Divide(dt, buf, n); err != nil {
						t.Fatalf("n=%d off=%d: %v", n, off, err)
					}
					if n == 1 {
						if !bytes.Equal(buf, a) {
							t.Fatalf("off=%d: dividing by 1 changed the buffer", off)
						}
						continue
					}
					checkSame(t, dt, buf, want, a, a, fmt.Sprintf("n=%d off=%d", n, off))
				}
			}
		})
	}
}

func TestDivideIntegersTruncateTowardZero(t *testing.T) {
	buf := Alloc(8 * 4)
	for i, v := range []int64{7, -7, math.MinInt64, math.MaxInt64} {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
	}
	if err := Divide(core.Int64, buf, 2); err != nil {
		t.Fatal(err)
	}
	want := []int64{3, -3, math.MinInt64 / 2, math.MaxInt64 / 2}
	for i, w := range want {
		if got := int64(binary.LittleEndian.Uint64(buf[8*i:])); got != w {
			t.Errorf("element %d = %d, want %d", i, got, w)
		}
	}
	b8 := []byte{0x80, 0x7f, 0x81} // int8 -128, 127, -127
	if err := Divide(core.Int8, b8, 128); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b8, []byte{0xff, 0, 0}) { // -1, 0, 0
		t.Errorf("int8 / 128 = %v, want [255 0 0]", b8)
	}
}

func TestAvgIsSumThenDivide(t *testing.T) {
	dst := Alloc(3 * 4)
	src := Alloc(3 * 4)
	for i, v := range []float32{1, 2, 3} {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(2*v))
	}
	if err := Reduce(core.Float32, core.Avg, dst, src); err != nil {
		t.Fatal(err)
	}
	if err := Divide(core.Float32, dst, 2); err != nil {
		t.Fatal(err)
	}
	for i, w := range []float32{1.5, 3, 4.5} {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(dst[4*i:])); got != w {
			t.Errorf("element %d = %v, want %v", i, got, w)
		}
	}
}

func TestReduceErrors(t *testing.T) {
	tests := []struct {
		name     string
		dt       core.DType
		op       core.Op
		dst, src int
		want     error
		mentions []string
	}{
		{"bitwise float", core.Float32, core.BAnd, 8, 8, ErrUnsupported, []string{"BAnd", "float32", "integer"}},
		{"bitwise half", core.BFloat16, core.BXor, 8, 8, ErrUnsupported, []string{"BXor", "bfloat16"}},
		{"byte", core.Byte, core.Sum, 8, 8, ErrUnsupported, []string{"byte"}},
		{"byte bitwise", core.Byte, core.BOr, 8, 8, ErrUnsupported, []string{"byte"}},
		{"zero dtype", core.DType(0), core.Sum, 8, 8, ErrUnsupported, []string{"unknown dtype", "DType(0)"}},
		{"unknown dtype", core.DType(99), core.Max, 8, 8, ErrUnsupported, []string{"DType(99)"}},
		{"unknown op", core.Int32, core.Op(8), 8, 8, ErrUnsupported, []string{"unknown op", "Op(8)"}},
		{"unknown op 200", core.Float64, core.Op(200), 8, 8, ErrUnsupported, []string{"Op(200)"}},
		{"length mismatch", core.Int32, core.Sum, 8, 12, ErrLength, []string{"8", "12"}},
		{"length mismatch empty", core.Float16, core.Sum, 0, 2, ErrLength, []string{"0", "2"}},
		{"not a multiple", core.Float32, core.Sum, 6, 6, ErrLength, []string{"6", "4"}},
		{"not a multiple 8", core.Uint64, core.Prod, 12, 12, ErrLength, []string{"12", "8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst, src := Alloc(tt.dst), Alloc(tt.src)
			for i := range dst {
				dst[i] = byte(i + 1)
			}
			before := bytes.Clone(dst)
			err := Reduce(tt.dt, tt.op, dst, src)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Reduce(%v, %v) = %v, want %v", tt.dt, tt.op, err, tt.want)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if !strings.HasPrefix(err.Error(), "comm: ") {
				t.Errorf("error %q lacks the comm: prefix", err)
			}
			if !bytes.Equal(dst, before) {
				t.Error("dst was modified despite the error")
			}
		})
	}
}

func TestDivideErrors(t *testing.T) {
	tests := []struct {
		name     string
		dt       core.DType
		len, n   int
		want     error
		mentions []string
	}{
		{"zero divisor", core.Float32, 8, 0, ErrDivisor, []string{"0"}},
		{"negative divisor", core.Int32, 8, -3, ErrDivisor, []string{"-3"}},
		{"byte", core.Byte, 8, 2, ErrUnsupported, []string{"byte"}},
		{"unknown dtype", core.DType(77), 8, 2, ErrUnsupported, []string{"DType(77)"}},
		{"not a multiple", core.Float64, 12, 2, ErrLength, []string{"12", "8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := Alloc(tt.len)
			for i := range buf {
				buf[i] = byte(i + 1)
			}
			before := bytes.Clone(buf)
			err := Divide(tt.dt, buf, tt.n)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Divide(%v, %d) = %v, want %v", tt.dt, tt.n, err, tt.want)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if !bytes.Equal(buf, before) {
				t.Error("buf was modified despite the error")
			}
		})
	}
}

func TestEmptyBuffers(t *testing.T) {
	for _, dt := range allDTypes {
		if err := Reduce(dt, core.Sum, nil, nil); err != nil {
			t.Errorf("Reduce(%v, nil, nil) = %v", dt, err)
		}
		if err := Divide(dt, nil, 3); err != nil {
			t.Errorf("Divide(%v, nil) = %v", dt, err)
		}
	}
}

func TestAlloc(t *testing.T) {
	for _, n := range []int{1, 2, 7, 8, 9, 63, 64, 65, 1000, 1 << 20} {
		b := Alloc(n)
		if len(b) != n {
			t.Fatalf("len(Alloc(%d)) = %d", n, len(b))
		}
		if p := uintptr(unsafe.Pointer(&b[0])); p%8 != 0 {
			t.Errorf("Alloc(%d) starts at %#x, not 8-byte aligned", n, p)
		}
		for i, v := range b {
			if v != 0 {
				t.Fatalf("Alloc(%d)[%d] = %d, want 0", n, i, v)
			}
		}
		b[n-1] = 1 // writable to the end
	}
	for _, n := range []int{0, -1} {
		if b := Alloc(n); b != nil {
			t.Errorf("Alloc(%d) = %v, want nil", n, b)
		}
	}
}

// TestMinMaxNaNAndZeros pins the documented Min/Max choices directly.
func TestMinMaxNaNAndZeros(t *testing.T) {
	negZero := math.Copysign(0, -1)
	nan := math.NaN()
	tests := []struct {
		op         core.Op
		a, b, want float64
	}{
		{core.Min, 0, negZero, negZero},
		{core.Min, negZero, 0, negZero},
		{core.Max, 0, negZero, 0},
		{core.Max, negZero, 0, 0},
		{core.Max, nan, 1, nan},
		{core.Max, 1, nan, nan},
		{core.Min, nan, math.Inf(-1), nan},
		{core.Min, math.Inf(-1), nan, nan},
		{core.Min, 2, -3, -3},
		{core.Max, 2, -3, 2},
	}
	for _, dt := range []core.DType{core.Float16, core.BFloat16, core.Float32, core.Float64} {
		for _, tt := range tests {
			dst, src := floatBuf(dt, tt.a), floatBuf(dt, tt.b)
			if err := Reduce(dt, tt.op, dst, src); err != nil {
				t.Fatal(err)
			}
			got := refLoadFloat(dt, dst)
			if !(math.IsNaN(got) && math.IsNaN(tt.want)) &&
				(got != tt.want || math.Signbit(got) != math.Signbit(tt.want)) {
				t.Errorf("%v %v(%v, %v) = %v, want %v", dt, tt.op, tt.a, tt.b, got, tt.want)
			}
		}
	}
}

// floatBuf encodes one float element of dt (v must be representable).
func floatBuf(dt core.DType, v float64) []byte {
	b := Alloc(dt.Size())
	switch dt {
	case core.Float16:
		binary.LittleEndian.PutUint16(b, refRoundHalf(v, fmtF16))
	case core.BFloat16:
		binary.LittleEndian.PutUint16(b, refRoundHalf(v, fmtBF16))
	case core.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	default:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	}
	return b
}

// TestPortablePathMatchesNative runs the portable (misaligned / big-endian)
// path on aligned buffers, so it is checked against the fast path on the
// same data regardless of where the allocator puts things. It runs twice:
// as this host is, and pretending the host is big-endian, which sends the
// data through the encoding/binary conversions a big-endian host would use
// (on a little-endian host they must then give the same bytes).
func TestPortablePathMatchesNative(t *testing.T) {
	for _, little := range []bool{true, false} {
		t.Run(fmt.Sprintf("littleEndianHost=%v", little), func(t *testing.T) {
			if !nativeLittleEndian {
				t.Skip("big-endian host: the native path itself needs little-endian data")
			}
			nativeLittleEndian = little
			defer func() { nativeLittleEndian = true }()
			testPortablePath(t)
		})
	}
}

func testPortablePath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !op.ValidFor(dt) {
				continue
			}
			a, b := randomBuffers(rng, dt, 1500)
			native, portable := placed(a, 0), placed(a, 0)
			src := placed(b, 0)
			reduceNative(dt, op, native, src)
			reducePortable(dt, op, portable, src)
			checkSame(t, dt, portable, native, a, b, fmt.Sprintf("%v %v", dt, op))
		}
		a, _ := randomBuffers(rng, dt, 1500)
		native, portable := placed(a, 0), placed(a, 0)
		divideNative(dt, native, 3)
		dividePortable(dt, portable, 3)
		checkSame(t, dt, portable, native, a, a, fmt.Sprintf("%v divide", dt))
	}
}

// TestReduceDoesNotAllocate guards the hot path: neither the fast path nor
// the portable one (stack scratch) may allocate.
func TestReduceDoesNotAllocate(t *testing.T) {
	f16Table() // built once, on first float16 use; not per call
	for _, dt := range allDTypes {
		for _, off := range []int{0, 1} {
			buf := Alloc(4096 + 8)
			dst, src := buf[off:off+2048], buf[2048+8:4096+8]
			allocs := testing.AllocsPerRun(20, func() {
				if err := Reduce(dt, core.Max, dst, src); err != nil {
					t.Fatal(err)
				}
				if err := Divide(dt, dst, 3); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v off=%d: %v allocations per Reduce+Divide", dt, off, allocs)
			}
		}
	}
}

// TestSwapLE checks the byte-order conversion the portable path uses on
// big-endian hosts: decoding must agree with encoding/binary element by
// element, and encoding must invert it.
func TestSwapLE(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	le := make([]byte, 3*1024)
	for i := range le {
		le[i] = byte(rng.Uint32())
	}
	for _, size := range []int{2, 4, 8} {
		host := Alloc(len(le))
		swapLE(size, host, le[:len(host)], true)
		for i := 0; i < len(le); i += size {
			var got uint64
			switch size {
			case 2:
				got = uint64(*(*uint16)(unsafe.Pointer(&host[i])))
			case 4:
				got = uint64(*(*uint32)(unsafe.Pointer(&host[i])))
			case 8:
				got = *(*uint64)(unsafe.Pointer(&host[i]))
			}
			if want := loadUint(le[i:], size); got != want {
				t.Fatalf("size %d element %d: decoded %#x, want %#x", size, i/size, got, want)
			}
		}
		back := make([]byte, len(le)+1)[1:] // misaligned on purpose
		swapLE(size, back, host, false)
		if !bytes.Equal(back, le) {
			t.Fatalf("size %d: encode(decode(x)) != x", size)
		}
	}
}
