//go:build mpi && cgo

package mpi

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
)

// The user-defined MPI ops must give the native backend's results bit for
// bit: compare them with internal/kernel over every float16 and bfloat16
// bit pattern (against a set of special and random operands), and over
// special and random float32 and float64 values for Min and Max. NaN
// results need only both be NaN ("some NaN", as the kernels document).

func halfIsNaN(dt core.DType, h uint16) bool {
	if dt == core.Float16 {
		return h&0x7c00 == 0x7c00 && h&0x03ff != 0
	}
	return h&0x7f80 == 0x7f80 && h&0x007f != 0
}

func TestHalfOpsMatchKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	special := []uint16{0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
		0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00, 0x3555, 0x4000, 0x5bff, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x0080, 0x007f}
	for range 120 {
		special = append(special, uint16(rng.Uint32()))
	}
	const n = 1 << 16
	all := kernel.Alloc(2 * n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(all[2*i:], uint16(i))
	}
	want, got, src := kernel.Alloc(2*n), kernel.Alloc(2*n), kernel.Alloc(2*n)
	for _, dt := range []core.DType{core.Float16, core.BFloat16} {
		for _, op := range []core.Op{core.Sum, core.Prod, core.Min, core.Max} {
			bad := 0
			for _, s := range special {
				for i := 0; i < n; i++ {
					binary.LittleEndian.PutUint16(src[2*i:], s)
				}
				copy(want, all)
				copy(got, all)
				if err := kernel.Reduce(dt, op, want, src); err != nil {
					t.Fatal(err)
				}
				if err := reduceLocal(dt, op, got, src); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n && bad < 5; i++ {
					w, g := binary.LittleEndian.Uint16(want[2*i:]), binary.LittleEndian.Uint16(got[2*i:])
					if w != g && !(halfIsNaN(dt, w) && halfIsNaN(dt, g)) {
						t.Errorf("%v %v: op(%#04x, %#04x) = %#04x, kernel says %#04x", dt, op, i, s, g, w)
						bad++
					}
				}
			}
		}
	}
}

func TestFloatMinMaxMatchKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f64 := []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN(), 1e-310, -1e-310, math.MaxFloat64, 3.5}
	for range 200 {
		f64 = append(f64, rng.NormFloat64()*1e3)
	}
	for _, dt := range []core.DType{core.Float32, core.Float64} {
		es := dt.Size()
		m := len(f64)
		dst, src := kernel.Alloc(m*m*es), kernel.Alloc(m*m*es)
		for i, a := range f64 {
			for j, b := range f64 {
				k := (i*m + j) * es
				if dt == core.Float32 {
					binary.LittleEndian.PutUint32(dst[k:], math.Float32bits(float32(a)))
					binary.LittleEndian.PutUint32(src[k:], math.Float32bits(float32(b)))
				} else {
					binary.LittleEndian.PutUint64(dst[k:], math.Float64bits(a))
					binary.LittleEndian.PutUint64(src[k:], math.Float64bits(b))
				}
			}
		}
		for _, op := range []core.Op{core.Min, core.Max} {
			want, got := kernel.Alloc(len(dst)), kernel.Alloc(len(dst))
			copy(want, dst)
			copy(got, dst)
			if err := kernel.Reduce(dt, op, want, src); err != nil {
				t.Fatal(err)
			}
			if err := reduceLocal(dt, op, got, src); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < len(want); k += es {
				var w, g float64
				var wb, gb uint64
				if dt == core.Float32 {
					wb, gb = uint64(binary.LittleEndian.Uint32(want[k:])), uint64(binary.LittleEndian.Uint32(got[k:]))
					w, g = float64(math.Float32frombits(uint32(wb))), float64(math.Float32frombits(uint32(gb)))
				} else {
					wb, gb = binary.LittleEndian.Uint64(want[k:]), binary.LittleEndian.Uint64(got[k:])
					w, g = math.Float64frombits(wb), math.Float64frombits(gb)
				}
				if wb != gb && !(math.IsNaN(w) && math.IsNaN(g)) {
					t.Fatalf("%v %v: element %d: got %v (%#x), kernel says %v (%#x)", dt, op, k/es, g, gb, w, wb)
				}
			}
		}
	}
}

// The C side numbers dtypes and ops as package backend does.
func TestCodesMatchBackend(t *testing.T) {
	if !enumsMatch() {
		t.Fatal("the C enums in mpi_shim.h no longer match backend.DType / backend.Op")
	}
}
