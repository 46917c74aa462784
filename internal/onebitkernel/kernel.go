package onebitkernel

import (
	"errors"
	"fmt"
)

// ErrLength reports buffers whose lengths do not fit together; the message
// says which.
var ErrLength = errors.New("comm: onebit kernel: buffer lengths")

// Compress is the first pass of a 1-bit compression of x with error
// feedback e: for every element j of e it forms b = x[j] + e[j] (x is
// padded with +0 past its end), adds float64(b)*float64(b) to a float64
// sum in index order, and packs the sign bit of b, 1 unless b < 0 (so +0,
// -0 and NaN give 1), MSB first: element 8k+i is bit 7-i of bits[k]. It
// returns the sum of squares and modifies nothing but bits.
//
// len(e) must be a multiple of 8, len(bits) == len(e)/8 and
// len(x) <= len(e). Safe for concurrent use on disjoint bits.
func Compress(x, e []float32, bits []byte) (float64, error) {
	if err := checkCompress(x, e, bits); err != nil {
		return 0, err
	}
	return compress(x, e, bits), nil
}

// CompressScale is Compress followed by Scale(sum, len(e)), the scale
// the 1-bit all-reduce sends, with the same bits, usually without forming
// the index-order sum: a sum of the squares in any order, with a bound on
// how far it can be from the index-order one, proves the scale when the
// whole interval rounds to it (scale.go); the rare sum the bound cannot
// settle is formed in index order. The signs are Compress's.
func CompressScale(x, e []float32, bits []byte) (float32, error) {
	if err := checkCompress(x, e, bits); err != nil {
		return 0, err
	}
	scale, _ := compressScale(x, e, bits)
	return scale, nil
}

// UpdateError is the second pass: e[j] = (x[j] + e[j]) - scale*sign[j],
// with x padded by +0 and the signs packed by Compress from the same x and
// e. scale*sign is scale or -scale (the negation: for a NaN scale only the
// NaN's sign bit could differ from a multiplication by -1). The lengths
// follow Compress's rules.
func UpdateError(x, e []float32, bits []byte, scale float32) error {
	if err := checkCompress(x, e, bits); err != nil {
		return err
	}
	updateError(x, e, bits, scale, -scale)
	return nil
}

// Unpack sets dst[j] = scale*sign[j] for every element of dst, reading
// MSB-first packed signs (bit 1 is +1, bit 0 is -1): the value is scale or
// -scale, as UpdateError's. len(dst) <= 8*len(bits); dst need not
// be a multiple of 8 long.
func Unpack(dst []float32, bits []byte, scale float32) error {
	if err := checkUnpack(dst, bits); err != nil {
		return err
	}
	unpack(dst, bits, scale, -scale)
	return nil
}

// UnpackAdd is Unpack that adds: dst[j] += scale*sign[j] in float32.
func UnpackAdd(dst []float32, bits []byte, scale float32) error {
	if err := checkUnpack(dst, bits); err != nil {
		return err
	}
	unpackAdd(dst, bits, scale, -scale)
	return nil
}

func checkCompress(x, e []float32, bits []byte) error {
	switch {
	case len(e)%8 != 0:
		return fmt.Errorf("%w: len(e) = %d is not a multiple of 8", ErrLength, len(e))
	case len(bits) != len(e)/8:
		return fmt.Errorf("%w: len(bits) = %d, want len(e)/8 = %d", ErrLength, len(bits), len(e)/8)
	case len(x) > len(e):
		return fmt.Errorf("%w: len(x) = %d is more than len(e) = %d", ErrLength, len(x), len(e))
	}
	return nil
}

func checkUnpack(dst []float32, bits []byte) error {
	if len(dst) > 8*len(bits) {
		return fmt.Errorf("%w: len(dst) = %d but bits hold %d signs", ErrLength, len(dst), 8*len(bits))
	}
	return nil
}
