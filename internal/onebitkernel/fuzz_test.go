package onebitkernel

import (
	"encoding/binary"
	"math"
	"testing"
)

// floatsOf reads little-endian float32 values from data (any length; a
// partial value at the end is dropped).
func floatsOf(data []byte) []float32 {
	v := make([]float32, len(data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return v
}

// FuzzPackRoundTrip packs arbitrary values of any length (padded to whole
// bytes with +0, as AllReduce pads) and unpacks them at every odd length:
// each element comes back as +scale unless it was < 0, the vector kernels
// agree with the Go loops, CompressScale gives Scale of the index-order
// sum, and nothing reads or writes out of bounds.
func FuzzPackRoundTrip(f *testing.F) {
	f.Add([]byte{}, float32(1))
	f.Add([]byte{0, 0, 0, 0x80, 0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0xbf}, float32(0.5)) // -0, NaN, -1
	f.Add(make([]byte, 4*37), float32(-2))
	f.Fuzz(func(t *testing.T, data []byte, scale float32) {
		x := floatsOf(data)
		w := (len(x) + 7) &^ 7
		e := make([]float32, w)
		bits := make([]byte, w/8)
		sum, err := Compress(x, e, bits)
		if err != nil {
			t.Fatal(err)
		}
		goBits := make([]byte, w/8)
		goSum := compressGo(x, e, goBits, 0, 0)
		if string(bits) != string(goBits) || !sameSum(sum, goSum) {
			t.Fatalf("vector and Go compress differ: %x/%v vs %x/%v", bits, sum, goBits, goSum)
		}
		got, err := CompressScale(x, e, bits)
		if err != nil {
			t.Fatal(err)
		}
		if want := Scale(goSum, w); math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("CompressScale %v, want %v (Scale of the index-order sum)", got, want)
		}
		if string(bits) != string(goBits) {
			t.Fatalf("CompressScale's signs %x, want %x", bits, goBits)
		}
		for _, l := range []int{len(x), len(x) / 2, max(len(x)-1, 0), min(len(x)+1, w)} {
			out := make([]float32, l)
			if err := Unpack(out, bits, scale); err != nil {
				t.Fatal(err)
			}
			for j, v := range out {
				want := scale
				if j < len(x) && x[j] < 0 {
					want = -scale
				}
				if math.Float32bits(v) != math.Float32bits(want) {
					t.Fatalf("element %d (%v, length %d): unpacked %v, want %v", j, x[min(j, len(x)-1)], l, v, want)
				}
			}
			goOut := make([]float32, l)
			unpackGo(goOut, bits, 0, scale, -scale)
			if i := sameFloats(out, goOut); i >= 0 {
				t.Fatalf("vector and Go unpack differ at %d", i)
			}
		}
	})
}

// FuzzUpdateError runs the error update and UnpackAdd on arbitrary values
// and tail lengths and wants the vector kernels to match the Go loops.
func FuzzUpdateError(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{8, 7, 6, 5}, float32(3))
	f.Fuzz(func(t *testing.T, xd, ed []byte, scale float32) {
		x, e := floatsOf(xd), floatsOf(ed)
		e = e[:len(e)&^7]
		if len(x) > len(e) {
			x = x[:len(e)]
		}
		bits := make([]byte, len(e)/8)
		if _, err := Compress(x, e, bits); err != nil {
			t.Fatal(err)
		}
		eV, eG := append([]float32(nil), e...), append([]float32(nil), e...)
		if err := UpdateError(x, eV, bits, scale); err != nil {
			t.Fatal(err)
		}
		updateErrorGo(x, eG, bits, 0, scale, -scale)
		if i := sameFloats(eV, eG); i >= 0 {
			t.Fatalf("UpdateError: vector and Go differ at %d: %v vs %v", i, eV[i], eG[i])
		}
		aV, aG := append([]float32(nil), x...), append([]float32(nil), x...)
		if err := UnpackAdd(aV, bits, scale); err != nil {
			t.Fatal(err)
		}
		unpackAddGo(aG, bits, 0, scale, -scale)
		if i := sameFloats(aV, aG); i >= 0 {
			t.Fatalf("UnpackAdd: vector and Go differ at %d: %v vs %v", i, aV[i], aG[i])
		}
	})
}
