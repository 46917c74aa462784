package comm

import (
	"reflect"
	"unsafe"

	"github.com/gocomm/comm/backend"
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
type DType = backend.DType

// ReduceOp is a reduction operator. Its numbering follows deepspeed.comm.ReduceOp.
type ReduceOp = backend.Op

// Reduction operators. The bitwise ones apply to integer types only; Avg
// divides the sum by the group size (truncating for integers).
const (
	Sum  = backend.Sum
	Prod = backend.Prod
	Min  = backend.Min
	Max  = backend.Max
	BAnd = backend.BAnd
	BOr  = backend.BOr
	BXor = backend.BXor
	Avg  = backend.Avg
)

// dtypeOf returns the DType of T: the exact element types first (Float16
// and BFloat16 among them), then, for a type defined on one, the DType of
// its underlying type.
func dtypeOf[T Numeric]() DType {
	var z T
	switch any(z).(type) {
	case int8:
		return backend.Int8
	case int16:
		return backend.Int16
	case int32:
		return backend.Int32
	case int64, int:
		return backend.Int64
	case uint8:
		return backend.Uint8
	case uint16:
		return backend.Uint16
	case uint32:
		return backend.Uint32
	case uint64, uint:
		return backend.Uint64
	case float32:
		return backend.Float32
	case float64:
		return backend.Float64
	case Float16:
		return backend.Float16
	case BFloat16:
		return backend.BFloat16
	}
	return dtypeOfKind(reflect.TypeFor[T]().Kind())
}

// dtypeOfKind is the DType of a defined type's underlying kind (Numeric's
// ~ terms: nothing else reaches it).
func dtypeOfKind(k reflect.Kind) DType {
	switch k {
	case reflect.Int8:
		return backend.Int8
	case reflect.Int16:
		return backend.Int16
	case reflect.Int32:
		return backend.Int32
	case reflect.Int64, reflect.Int:
		return backend.Int64
	case reflect.Uint8:
		return backend.Uint8
	case reflect.Uint16:
		return backend.Uint16
	case reflect.Uint32:
		return backend.Uint32
	case reflect.Uint64, reflect.Uint:
		return backend.Uint64
	case reflect.Float32:
		return backend.Float32
	case reflect.Float64:
		return backend.Float64
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
