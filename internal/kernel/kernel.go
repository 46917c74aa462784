package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gocomm/comm/core"
)

// Errors returned by [Reduce] and [Divide]. They are wrapped with details
// (the function, dtype, op and lengths); match them with errors.Is.
var (
	// ErrUnsupported is returned when the dtype is unknown or Byte, the op is
	// unknown, or a bitwise op is asked of a floating-point dtype.
	ErrUnsupported = errors.New("comm: kernel: unsupported dtype or op")
	// ErrLength is returned when dst and src differ in length or a length is
	// not a multiple of the element size.
	ErrLength = errors.New("comm: kernel: bad buffer length")
	// ErrDivisor is returned by Divide when the divisor is below 1.
	ErrDivisor = errors.New("comm: kernel: bad divisor")
)

// nativeLittleEndian reports whether the host stores integers little-endian,
// which is what lets the fast path reinterpret wire bytes in place.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Reduce sets dst[i] = op(dst[i], src[i]) for every element of type dt held
// little-endian in dst and src. Avg reduces like Sum; divide once at the end
// with [Divide].
//
// len(dst) must equal len(src) and be a multiple of dt.Size(); otherwise the
// error wraps [ErrLength] and dst is untouched. An op that cannot reduce dt
// (see core.Op.ValidFor) gives an error wrapping [ErrUnsupported].
//
// dst and src may be the same slice but must not otherwise overlap. Reduce
// keeps neither after it returns and is safe to call concurrently on
// disjoint buffers. Buffers aligned for dt (see [Alloc]) take the fast path.
func Reduce(dt core.DType, op core.Op, dst, src []byte) error {
	if !op.ValidFor(dt) {
		return unsupported("Reduce", dt, op)
	}
	size := dt.Size()
	if len(dst) != len(src) {
		return fmt.Errorf("%w: Reduce %v %v: dst has %d bytes but src has %d; pass equal lengths",
			ErrLength, dt, op, len(dst), len(src))
	}
	if len(dst)%size != 0 {
		return fmt.Errorf("%w: Reduce %v %v: %d bytes is not a multiple of the %d-byte element size",
			ErrLength, dt, op, len(dst), size)
	}
	if len(dst) == 0 {
		return nil
	}
	if nativeLittleEndian && aligned(dst, size) && aligned(src, size) {
		reduceNative(dt, op, dst, src)
		return nil
	}
	reducePortable(dt, op, dst, src)
	return nil
}

// reduceToPiece is the piece ReduceTo copies and then reduces while it is
// still in the first-level cache.
const reduceToPiece = 16 << 10

// ReduceTo sets dst[i] = a[i] op b[i], exactly as copying a into dst and
// then calling Reduce(dt, op, dst, b) would, but in cache-sized pieces, so
// that dst is written to memory once. dst may be a; otherwise the three
// must not overlap. Lengths and ops are checked as by Reduce.
func ReduceTo(dt core.DType, op core.Op, dst, a, b []byte) error {
	if len(a) != len(dst) {
		return fmt.Errorf("%w: ReduceTo %v %v: dst has %d bytes but a has %d; pass equal lengths",
			ErrLength, dt, op, len(dst), len(a))
	}
	if err := Reduce(dt, op, dst[:0], b[:0]); err != nil || len(dst) != len(b) || len(dst)%dt.Size() != 0 {
		return Reduce(dt, op, dst, b) // the same checks, the same error
	}
	piece := reduceToPiece / dt.Size() * dt.Size()
	for off := 0; off < len(dst); off += piece {
		end := min(off+piece, len(dst))
		copy(dst[off:end], a[off:end])
		if err := Reduce(dt, op, dst[off:end], b[off:end]); err != nil {
			return err
		}
	}
	return nil
}

// ReduceAll sets dst[i] = srcs[0][i] op srcs[1][i] op ... in the order of
// srcs, exactly as copying srcs[0] into dst and then calling Reduce(dt, op,
// dst, src) for each later src would, but in cache-sized pieces, so that
// dst is written to memory once however many sources there are. dst must
// not overlap any source; srcs must not be empty. Lengths and ops are
// checked as by Reduce.
func ReduceAll(dt core.DType, op core.Op, dst []byte, srcs [][]byte) error {
	if len(srcs) == 0 {
		return fmt.Errorf("%w: ReduceAll %v %v: no sources", ErrLength, dt, op)
	}
	for _, src := range srcs {
		if len(src) != len(dst) {
			return fmt.Errorf("%w: ReduceAll %v %v: dst has %d bytes but a source has %d; pass equal lengths",
				ErrLength, dt, op, len(dst), len(src))
		}
	}
	if err := Reduce(dt, op, dst[:0], dst[:0]); err != nil || len(dst)%dt.Size() != 0 {
		return Reduce(dt, op, dst, dst) // the same checks, the same error
	}
	piece := reduceToPiece / dt.Size() * dt.Size()
	for off := 0; off < len(dst); off += piece {
		end := min(off+piece, len(dst))
		copy(dst[off:end], srcs[0][off:end])
		for _, src := range srcs[1:] {
			if err := Reduce(dt, op, dst[off:end], src[off:end]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReduceAllOut is ReduceAll writing the result twice, to dst and to out
// (of dst's length; dst overlaps no other buffer, and out none but
// possibly a source it is exactly: element i is stored after every
// source's element i is read), with stores that bypass this core's cache
// where it can (with CacheBypass on, linux/amd64 with AVX2, the ops
// Reduce runs in vector registers, dst and out 32-byte aligned), and in
// one pass over the sources. It is for results too large to stay in the
// cache that another core reads from out: ReduceAll then CopyShared would
// write dst with reads for ownership and read it back, about a third
// slower on a large shared-memory all-reduce's stripes. It returns after the stores
// are ordered before any later store. Lengths and ops are checked as by
// ReduceAll.
func ReduceAllOut(dt core.DType, op core.Op, dst, out []byte, srcs [][]byte) error {
	if len(out) != len(dst) {
		return fmt.Errorf("%w: ReduceAllOut %v %v: dst has %d bytes but out has %d; pass equal lengths",
			ErrLength, dt, op, len(dst), len(out))
	}
	if len(srcs) < 2 || !cacheBypass.Load() {
		err := ReduceAll(dt, op, dst, srcs)
		if err == nil {
			CopyShared(out, dst)
		}
		return err
	}
	if err := Reduce(dt, op, dst[:0], dst[:0]); err != nil || len(dst)%dt.Size() != 0 {
		return ReduceAll(dt, op, dst, srcs) // the same checks, the same error
	}
	for _, src := range srcs {
		if len(src) != len(dst) {
			return ReduceAll(dt, op, dst, srcs)
		}
	}
	piece := reduceToPiece / dt.Size() * dt.Size()
	last := len(srcs) - 1
	for off := 0; off < len(dst); off += piece {
		end := min(off+piece, len(dst))
		d, o, a, b := dst[off:end], out[off:end], srcs[0][off:end], srcs[last][off:end]
		if last > 1 {
			// The sources but the last into dst, which stays in the
			// cache until the last pass writes it around it.
			copy(d, a)
			for _, src := range srcs[1:last] {
				if err := Reduce(dt, op, d, src[off:end]); err != nil {
					return err
				}
			}
			a = d
		}
		n := reduceToNT(dt, op, d, o, a, b)
		if n < len(d) {
			if err := ReduceTo(dt, op, d[n:], a[n:], b[n:]); err != nil {
				return err
			}
			CopyShared(o[n:], d[n:])
		}
	}
	return nil
}

// Divide sets buf[i] /= n for every element of type dt held little-endian in
// buf; it finishes an Avg after a Sum reduction over n contributions.
//
// float32 and float64 divide by n converted to their own type (exact for n up
// to 2^24 and 2^53); float16 and bfloat16 widen to float32, divide in float32
// and round back to nearest even; integers truncate toward zero.
//
// Dividing by 1 leaves buf exactly as it is (signaling NaNs included).
//
// n must be at least 1 (else the error wraps [ErrDivisor]) and len(buf) a
// multiple of dt.Size() (else [ErrLength]); Byte or an unknown dtype gives
// [ErrUnsupported]. On error buf is untouched. buf is not kept after Divide
// returns.
func Divide(dt core.DType, buf []byte, n int) error {
	if !core.Sum.ValidFor(dt) {
		if !dt.Valid() {
			return fmt.Errorf("%w: Divide: unknown dtype %v", ErrUnsupported, dt)
		}
		return fmt.Errorf("%w: Divide: %v elements cannot be divided; use a numeric dtype", ErrUnsupported, dt)
	}
	if n < 1 {
		return fmt.Errorf("%w: Divide %v by %d: the divisor must be at least 1 (the number of contributions)",
			ErrDivisor, dt, n)
	}
	size := dt.Size()
	if len(buf)%size != 0 {
		return fmt.Errorf("%w: Divide %v: %d bytes is not a multiple of the %d-byte element size",
			ErrLength, dt, len(buf), size)
	}
	if n == 1 || len(buf) == 0 {
		return nil
	}
	if nativeLittleEndian && aligned(buf, size) {
		divideNative(dt, buf, n)
		return nil
	}
	dividePortable(dt, buf, n)
	return nil
}

// Alloc returns an n-byte zeroed slice whose first byte is 8-byte aligned, so
// that every element type takes the fast path of [Reduce] and [Divide] (and
// so does any sub-slice starting at a multiple of the element size). It
// returns nil for n <= 0. The memory is ordinary garbage-collected memory.
func Alloc(n int) []byte {
	if n <= 0 {
		return nil
	}
	words := make([]uint64, (n-1)/8+1)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

// unsupported explains why op cannot reduce dt.
func unsupported(fn string, dt core.DType, op core.Op) error {
	switch {
	case !dt.Valid():
		return fmt.Errorf("%w: %s: unknown dtype %v", ErrUnsupported, fn, dt)
	case dt == core.Byte:
		return fmt.Errorf("%w: %s %v: byte buffers are opaque and cannot be reduced; use a numeric dtype",
			ErrUnsupported, fn, op)
	case op > core.Avg:
		return fmt.Errorf("%w: %s %v: unknown op %v", ErrUnsupported, fn, dt, op)
	default:
		return fmt.Errorf("%w: %s: %v needs an integer dtype, got %v", ErrUnsupported, fn, op, dt)
	}
}

// aligned reports whether b starts at an address that is a multiple of size
// (a power of two).
func aligned(b []byte, size int) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&uintptr(size-1) == 0
}

// view reinterprets b as a slice of T. b must be aligned for T, hold
// little-endian data on a little-endian host, and have a length that is a
// multiple of T's size.
func view[T any](b []byte) []T {
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// reduceNative runs the typed kernel for dt over buffers that view accepts.
func reduceNative(dt core.DType, op core.Op, dst, src []byte) {
	n := reduceVector(dt, op, dst, src)
	reduceLoops(dt, op, dst[n:], src[n:])
}

// reduceLoops is reduceNative in the Go loops alone.
func reduceLoops(dt core.DType, op core.Op, dst, src []byte) {
	switch dt {
	case core.Int8:
		reduceInteger(op, view[int8](dst), view[int8](src))
	case core.Int16:
		reduceInteger(op, view[int16](dst), view[int16](src))
	case core.Int32:
		reduceInteger(op, view[int32](dst), view[int32](src))
	case core.Int64:
		reduceInteger(op, view[int64](dst), view[int64](src))
	case core.Uint8:
		reduceInteger(op, view[uint8](dst), view[uint8](src))
	case core.Uint16:
		reduceInteger(op, view[uint16](dst), view[uint16](src))
	case core.Uint32:
		reduceInteger(op, view[uint32](dst), view[uint32](src))
	case core.Uint64:
		reduceInteger(op, view[uint64](dst), view[uint64](src))
	case core.Float32:
		reduceFloat(op, view[float32](dst), view[float32](src))
	case core.Float64:
		reduceFloat(op, view[float64](dst), view[float64](src))
	case core.Float16:
		reduceF16(op, view[uint16](dst), view[uint16](src))
	case core.BFloat16:
		reduceBF16(op, view[uint16](dst), view[uint16](src))
	}
}

// divideNative runs the typed division for dt over a buffer view accepts.
func divideNative(dt core.DType, buf []byte, n int) {
	switch dt {
	case core.Int8:
		divideSigned(view[int8](buf), n)
	case core.Int16:
		divideSigned(view[int16](buf), n)
	case core.Int32:
		divideSigned(view[int32](buf), n)
	case core.Int64:
		divideSigned(view[int64](buf), n)
	case core.Uint8:
		divideUnsigned(view[uint8](buf), n)
	case core.Uint16:
		divideUnsigned(view[uint16](buf), n)
	case core.Uint32:
		divideUnsigned(view[uint32](buf), n)
	case core.Uint64:
		divideUnsigned(view[uint64](buf), n)
	case core.Float32:
		divideFloat(view[float32](buf), float32(n))
	case core.Float64:
		divideFloat(view[float64](buf), float64(n))
	case core.Float16:
		divideF16(view[uint16](buf), float32(n))
	case core.BFloat16:
		divideBF16(view[uint16](buf), float32(n))
	}
}

// scratchWords is the size, in 8-byte words, of each stack buffer the
// portable path decodes a chunk into: small enough for the stack and L1,
// large enough that the per-chunk overhead vanishes.
const scratchWords = 256

// reducePortable handles buffers the fast path cannot view (misaligned, or a
// big-endian host): it decodes chunks of dst and src into aligned scratch in
// host order, reduces them with the typed kernels and encodes the result back.
func reducePortable(dt core.DType, op core.Op, dst, src []byte) {
	var dw, sw [scratchWords]uint64
	db := unsafe.Slice((*byte)(unsafe.Pointer(&dw[0])), len(dw)*8)
	sb := unsafe.Slice((*byte)(unsafe.Pointer(&sw[0])), len(sw)*8)
	size := dt.Size()
	for off := 0; off < len(dst); off += len(db) {
		n := min(len(db), len(dst)-off)
		d, s := dst[off:off+n], src[off:off+n]
		decodeLE(size, db[:n], d)
		decodeLE(size, sb[:n], s)
		reduceNative(dt, op, db[:n], sb[:n])
		encodeLE(size, d, db[:n])
	}
}

// dividePortable is the Divide counterpart of reducePortable.
func dividePortable(dt core.DType, buf []byte, n int) {
	var w [scratchWords]uint64
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
	size := dt.Size()
	for off := 0; off < len(buf); off += len(b) {
		k := min(len(b), len(buf)-off)
		chunk := buf[off : off+k]
		decodeLE(size, b[:k], chunk)
		divideNative(dt, b[:k], n)
		encodeLE(size, chunk, b[:k])
	}
}

// decodeLE fills out (aligned, same length as in) with the size-byte
// little-endian elements of in, in host byte order. On a little-endian host
// that is a plain copy (the portable path then only fixes alignment).
func decodeLE(size int, out, in []byte) {
	if nativeLittleEndian || size == 1 {
		copy(out, in)
		return
	}
	swapLE(size, out, in, true)
}

// encodeLE is the inverse of decodeLE: it writes the host-order elements of
// in (aligned) to out as size-byte little-endian values.
func encodeLE(size int, out, in []byte) {
	if nativeLittleEndian || size == 1 {
		copy(out, in)
		return
	}
	swapLE(size, out, in, false)
}

// swapLE converts between little-endian bytes and host-order elements of
// 2, 4 or 8 bytes with encoding/binary, whatever the host's byte order:
// decoding reads le and writes host (aligned); encoding reads host and
// writes le.
func swapLE(size int, out, in []byte, decode bool) {
	host, le := out, in
	if !decode {
		host, le = in, out
	}
	switch size {
	case 2:
		h := view[uint16](host)
		for i := range h {
			if decode {
				h[i] = binary.LittleEndian.Uint16(le[2*i:])
			} else {
				binary.LittleEndian.PutUint16(le[2*i:], h[i])
			}
		}
	case 4:
		h := view[uint32](host)
		for i := range h {
			if decode {
				h[i] = binary.LittleEndian.Uint32(le[4*i:])
			} else {
				binary.LittleEndian.PutUint32(le[4*i:], h[i])
			}
		}
	case 8:
		h := view[uint64](host)
		for i := range h {
			if decode {
				h[i] = binary.LittleEndian.Uint64(le[8*i:])
			} else {
				binary.LittleEndian.PutUint64(le[8*i:], h[i])
			}
		}
	}
}

// CopyShared copies src into dst as copy does (min(len(dst), len(src))
// bytes; they must not overlap) for another core to read next. With
// CacheBypass on (the default) it does so where it can (linux/amd64 with
// AVX2, from 256 bytes) with stores that bypass this core's cache: a core
// that writes lines another core has read waits for each of them to be
// taken back from that core's cache; these stores do not, and the reader
// gets the data from memory. Whether that pays depends on the machine
// (SetCacheBypass): on a 2-vCPU AMD EPYC VM, writing 128 KiB the other
// core had just read, 5.2 GB/s with copy, 46.8 with these stores; on a
// 2-vCPU Intel Xeon VM whose cores share a 300 MiB last-level cache, the
// peer reads cached lines faster than memory, and shared-memory
// all-reduces of 64 KiB-16 MiB took 15-34% less time with plain copies. It
// returns after the stores are ordered before any later store (a flag
// that publishes the data).
func CopyShared(dst, src []byte) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	if !cacheBypass.Load() {
		copy(dst, src) // ordered before the atomic store that publishes it
		return
	}
	lo, hi := copyNT(dst, src)
	copy(dst[:lo], src[:lo])
	copy(dst[hi:], src[hi:])
}

// cacheBypass says whether CopyShared bypasses the cache (SetCacheBypass).
var cacheBypass atomic.Bool

func init() { cacheBypass.Store(true) }

// SetCacheBypass chooses how CopyShared writes, for the whole process:
// with stores that bypass the writer's cache (on), or with plain copies
// (off), which is faster where the cores share their last-level cache
// (see CopyShared). It is safe to call at any time; copies under way
// finish as they began.
func SetCacheBypass(on bool) { cacheBypass.Store(on) }

// CacheBypass reports SetCacheBypass's last choice (on by default).
func CacheBypass() bool { return cacheBypass.Load() }
