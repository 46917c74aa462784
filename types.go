package comm

import (
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

// Numeric is the set of element types collectives move and reduce.
// int and uint are 64-bit on the platforms gocomm supports.
type Numeric interface {
	int8 | int16 | int32 | int64 | int |
		uint8 | uint16 | uint32 | uint64 | uint |
		float32 | float64 | Float16 | BFloat16
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

// dtypeOf returns the DType of T.
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
	panic("unreachable: Numeric covers every case")
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
