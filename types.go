package comm

import (
	"reflect"
	"unsafe"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
)

// Float16 is an IEEE 754 binary16 value, stored as its bits. Collectives
// reduce it in float32 and round back to nearest even.
type Float16 uint16

// NewFloat16 rounds f to the nearest Float16.
func NewFloat16(f float32) Float16 { return Float16(kernel.F32ToF16(f)) }

// Float32 widens h exactly.
func (h Float16) Float32() float32 { return kernel.F16ToF32(uint16(h)) }

// BFloat16 is a bfloat16 value (the top half of a float32), stored as its
// bits. Collectives reduce it in float32 and round back to nearest even.
type BFloat16 uint16

// NewBFloat16 rounds f to the nearest BFloat16.
func NewBFloat16(f float32) BFloat16 { return BFloat16(kernel.F32ToBF16(f)) }

// Float32 widens b exactly.
func (b BFloat16) Float32() float32 { return kernel.BF16ToF32(uint16(b)) }

// Numeric is the set of element types collectives move and reduce: the
// sized integers, int and uint (64-bit on the platforms gocomm supports),
// float32, float64, Float16 and BFloat16, and every type defined on one of
// them (type Grad float32 is a float32 to gocomm). Float16 and BFloat16
// are defined on uint16, so a type defined on Float16 or BFloat16 in turn
// (type Half comm.Float16) is a uint16 to gocomm, reduced as an integer:
// use Float16 and BFloat16 themselves for half-precision data.
type Numeric interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint |
		~float32 | ~float64
}

// DType names an element type (wire and kernel level).
type DType = core.DType

// ReduceOp is a reduction operator. Its numbering follows deepspeed.comm.ReduceOp.
type ReduceOp = core.Op

// Reduction operators. The bitwise ones apply to integer types only; Avg
// divides the sum by the group size (truncating for integers).
const (
	Sum  = core.Sum
	Prod = core.Prod
	Min  = core.Min
	Max  = core.Max
	BAnd = core.BAnd
	BOr  = core.BOr
	BXor = core.BXor
	Avg  = core.Avg
)

// dtypeOf returns the DType of T: the exact element types first (Float16
// and BFloat16 among them), then, for a type defined on one, the DType of
// its underlying type.
func dtypeOf[T Numeric]() DType {
	var z T
	switch any(z).(type) {
	case int8:
		return core.Int8
	case int16:
		return core.Int16
	case int32:
		return core.Int32
	case int64, int:
		return core.Int64
	case uint8:
		return core.Uint8
	case uint16:
		return core.Uint16
	case uint32:
		return core.Uint32
	case uint64, uint:
		return core.Uint64
	case float32:
		return core.Float32
	case float64:
		return core.Float64
	case Float16:
		return core.Float16
	case BFloat16:
		return core.BFloat16
	}
	return dtypeOfKind(reflect.TypeFor[T]().Kind())
}

// dtypeOfKind is the DType of a defined type's underlying kind (Numeric's
// ~ terms: nothing else reaches it).
func dtypeOfKind(k reflect.Kind) DType {
	switch k {
	case reflect.Int8:
		return core.Int8
	case reflect.Int16:
		return core.Int16
	case reflect.Int32:
		return core.Int32
	case reflect.Int64, reflect.Int:
		return core.Int64
	case reflect.Uint8:
		return core.Uint8
	case reflect.Uint16:
		return core.Uint16
	case reflect.Uint32:
		return core.Uint32
	case reflect.Uint64, reflect.Uint:
		return core.Uint64
	case reflect.Float32:
		return core.Float32
	case reflect.Float64:
		return core.Float64
	}
	panic("unreachable: Numeric's underlying types are all listed")
}

// asBytes views s as its raw bytes (no copy).
func asBytes[T Numeric](s []T) []byte {
	if len(s) == 0 {
		if s == nil {
			return nil
		}
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// overlap reports whether two slices share memory, and whether they are the
// very same slice (same start and length).
func overlap[T Numeric](a, b []T) (shared, same bool) {
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	var z T
	sz := unsafe.Sizeof(z)
	a0 := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	b0 := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	a1 := a0 + uintptr(len(a))*sz
	b1 := b0 + uintptr(len(b))*sz
	return a0 < b1 && b0 < a1, a0 == b0 && len(a) == len(b)
}
