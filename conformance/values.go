package conformance

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/gocomm/comm"
)

// The inputs are small integers, so that every reduction of up to a few
// dozen ranks is exact in every element type (float16 and bfloat16
// included) whatever order the algorithm reduces in, and the naive
// reference can be computed in int64 and float64 and converted.

// typeInfo describes an element type to the reference.
type typeInfo struct {
	name     string
	float    bool
	unsigned bool
}

func infoOf[T comm.Numeric]() typeInfo {
	var z T
	switch any(z).(type) {
	case float32:
		return typeInfo{"float32", true, false}
	case float64:
		return typeInfo{"float64", true, false}
	case comm.Float16:
		return typeInfo{"float16", true, false}
	case comm.BFloat16:
		return typeInfo{"bfloat16", true, false}
	case uint8:
		return typeInfo{"uint8", false, true}
	case uint16:
		return typeInfo{"uint16", false, true}
	case uint32:
		return typeInfo{"uint32", false, true}
	case uint64:
		return typeInfo{"uint64", false, true}
	case uint:
		return typeInfo{"uint", false, true}
	case int8:
		return typeInfo{"int8", false, false}
	case int16:
		return typeInfo{"int16", false, false}
	case int32:
		return typeInfo{"int32", false, false}
	case int64:
		return typeInfo{"int64", false, false}
	case int:
		return typeInfo{"int", false, false}
	}
	return namedInfo(reflect.TypeFor[T]())
}

// namedInfo describes a type defined on an element type (type Grad
// float32): what its underlying type is, named after the type itself.
func namedInfo(t reflect.Type) typeInfo {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return typeInfo{t.Name(), true, false}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return typeInfo{t.Name(), false, true}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return typeInfo{t.Name(), false, false}
	}
	panic(fmt.Sprintf("conformance: no typeInfo for %v", t))
}

// of converts an exactly representable integer value to T.
func of[T comm.Numeric](v int64) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(v)
	case *float64:
		*p = float64(v)
	case *comm.Float16:
		*p = comm.NewFloat16(float32(v))
	case *comm.BFloat16:
		*p = comm.NewBFloat16(float32(v))
	case *int8:
		*p = int8(v)
	case *int16:
		*p = int16(v)
	case *int32:
		*p = int32(v)
	case *int64:
		*p = v
	case *int:
		*p = int(v)
	case *uint8:
		*p = uint8(v)
	case *uint16:
		*p = uint16(v)
	case *uint32:
		*p = uint32(v)
	case *uint64:
		*p = uint64(v)
	case *uint:
		*p = uint(v)
	default:
		setNamed(reflect.ValueOf(&z).Elem(), float64(v), v)
	}
	return z
}

// setNamed sets x, of a type defined on an element type, to v (f for the
// floating-point kinds, exactly representable).
func setNamed(x reflect.Value, f float64, v int64) {
	switch {
	case x.CanFloat():
		x.SetFloat(f)
	case x.CanInt():
		x.SetInt(v)
	case x.CanUint():
		x.SetUint(uint64(v))
	}
}

// value is element i of rank r's input for a reduction with op. Products
// stay within int8 and float16 for up to 6 ranks; bitwise ops get varied
// bit patterns within 7 bits.
func value(op comm.ReduceOp, unsigned bool, r, i int) int64 {
	switch op {
	case comm.Prod:
		v := int64((r*5+i*3)%3) + 1 // 1..3, products of <= 4 ranks stay <= 81
		if r >= 4 {
			v = 1
		}
		if !unsigned && (r+i)%4 == 1 {
			v = -v
		}
		return v
	case comm.BAnd, comm.BOr, comm.BXor:
		return int64((r*37 + i*11 + 5) & 0x7f)
	}
	v := int64((r*7+i*3)%11) - 5 // -5..5
	if unsigned {
		v += 5
	}
	return v
}

// data is element i of rank r's input for a non-reducing collective.
func data(r, i int) int64 { return int64((r*13+i*7)%100) - 50 }

func dataU(unsigned bool, r, i int) int64 {
	v := data(r, i)
	if unsigned {
		v += 50
	}
	return v
}

// fill returns v(0), ..., v(n-1) as T, converting with one type switch per
// slice rather than one per element: the suite moves MiBs per case, and
// under -race a conversion through an interface per element dominated.
func fill[T comm.Numeric](n int, v func(i int) int64) []T {
	out := make([]T, n)
	switch o := any(out).(type) {
	case []int8:
		for i := range o {
			o[i] = int8(v(i))
		}
	case []int16:
		for i := range o {
			o[i] = int16(v(i))
		}
	case []int32:
		for i := range o {
			o[i] = int32(v(i))
		}
	case []int64:
		for i := range o {
			o[i] = v(i)
		}
	case []int:
		for i := range o {
			o[i] = int(v(i))
		}
	case []uint8:
		for i := range o {
			o[i] = uint8(v(i))
		}
	case []uint16:
		for i := range o {
			o[i] = uint16(v(i))
		}
	case []uint32:
		for i := range o {
			o[i] = uint32(v(i))
		}
	case []uint64:
		for i := range o {
			o[i] = uint64(v(i))
		}
	case []uint:
		for i := range o {
			o[i] = uint(v(i))
		}
	case []float32:
		for i := range o {
			o[i] = float32(v(i))
		}
	case []float64:
		for i := range o {
			o[i] = float64(v(i))
		}
	default:
		for i := range out {
			out[i] = of[T](v(i))
		}
	}
	return out
}

// reduceAcc is op over the int64 values of ranks 0..n-1 at element i.
func reduceAcc(op comm.ReduceOp, unsigned bool, n, i int) int64 {
	acc := value(op, unsigned, 0, i)
	for r := 1; r < n; r++ {
		v := value(op, unsigned, r, i)
		switch op {
		case comm.Sum, comm.Avg:
			acc += v
		case comm.Prod:
			acc *= v
		case comm.Min:
			acc = min(acc, v)
		case comm.Max:
			acc = max(acc, v)
		case comm.BAnd:
			acc &= v
		case comm.BOr:
			acc |= v
		case comm.BXor:
			acc ^= v
		}
	}
	return acc
}

// reduceRef is the naive reference: op over the values of ranks 0..n-1 at
// element i, computed in int64 (exact for these inputs), with Avg divided
// the way the library defines it for T.
func reduceRef[T comm.Numeric](op comm.ReduceOp, n, i int) T {
	ti := infoOf[T]()
	acc := reduceAcc(op, ti.unsigned, n, i)
	if op != comm.Avg {
		return of[T](acc)
	}
	if !ti.float {
		return of[T](acc / int64(n)) // truncation toward zero
	}
	var z T
	switch any(z).(type) {
	case float64:
		return any(float64(acc) / float64(n)).(T)
	case float32:
		return any(float32(acc) / float32(n)).(T)
	case comm.Float16:
		return any(comm.NewFloat16(float32(acc) / float32(n))).(T)
	case comm.BFloat16:
		return any(comm.NewBFloat16(float32(acc) / float32(n))).(T)
	}
	// A type defined on float32 or float64: divide in its precision.
	x := reflect.ValueOf(&z).Elem()
	if x.Kind() == reflect.Float32 {
		x.SetFloat(float64(float32(acc) / float32(n)))
	} else {
		x.SetFloat(float64(acc) / float64(n))
	}
	return z
}

// same compares bit patterns (so that -0 and +0 or NaNs would show).
func same[T comm.Numeric](a, b T) bool {
	switch x := any(a).(type) {
	case float32:
		return math.Float32bits(x) == math.Float32bits(any(b).(float32))
	case float64:
		return math.Float64bits(x) == math.Float64bits(any(b).(float64))
	}
	return a == b
}

// check compares got with want and describes the first difference.
func check[T comm.Numeric](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: got %d elements, want %d", what, len(got), len(want))
	}
	if bytes.Equal(bytesOf(got), bytesOf(want)) {
		return nil // same bit patterns: what same compares, at memory speed
	}
	for i := range got {
		if !same(got[i], want[i]) {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(got), show(got[i]), show(want[i]))
		}
	}
	return nil
}

func show[T comm.Numeric](v T) any {
	switch x := any(v).(type) {
	case comm.Float16:
		return x.Float32()
	case comm.BFloat16:
		return x.Float32()
	}
	return v
}

// bytesOf views xs as its bytes.
func bytesOf[T comm.Numeric](xs []T) []byte {
	if len(xs) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs)*int(unsafe.Sizeof(xs[0])))
}
