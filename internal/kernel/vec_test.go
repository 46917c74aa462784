package kernel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestVectorMatchesGoLoops: where a vector kernel reduces a prefix
// (reduceVector), the result is bit for bit what the Go loops give for
// the whole buffer, at lengths around the kernels' 128-byte blocks and
// with every edge value paired with every other (randomBuffers' first
// elements); where the loops give a NaN, a NaN (which operand's payload a
// NaN result keeps follows the order the compiler puts the operands in:
// the Go loops themselves give d's under one build and s's under -race).
func TestVectorMatchesGoLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			if !op.ValidFor(dt) {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				for _, n := range []int{0, 127, 128, 129, 255, 256, 1000, 4096 + 40} {
					if n%dt.Size() != 0 {
						n -= n % dt.Size()
					}
					a, b := randomBuffers(rng, dt, n/dt.Size())
					vec, loops := placed(a, 0), placed(a, 0)
					reduceNative(dt, op, vec, b)
					reduceLoops(dt, op, loops, b)
					if !bytes.Equal(vec, loops) {
						size := dt.Size()
						for i := 0; i < n; i += size {
							v, l := loadUint(vec[i:], size), loadUint(loops[i:], size)
							if v != l && !(isNaNBits(dt, v) && isNaNBits(dt, l)) {
								t.Fatalf("%d bytes: element %d: vector % x, Go loops % x (inputs % x, % x)", n, i/dt.Size(),
									vec[i:i+dt.Size()], loops[i:i+dt.Size()], a[i:i+dt.Size()], b[i:i+dt.Size()])
							}
						}
					}
				}
			})
		}
	}
}

// TestCopyShared copies like copy at every length and alignment around
// the non-temporal part's limits, with the cache bypassed or not.
func TestCopyShared(t *testing.T) {
	defer SetCacheBypass(CacheBypass())
	for _, bypass := range []bool{true, false} {
		SetCacheBypass(bypass)
		if CacheBypass() != bypass {
			t.Fatalf("SetCacheBypass(%v) did not hold", bypass)
		}
		testCopyShared(t)
	}
}

func testCopyShared(t *testing.T) {
	src := make([]byte, 4096+300)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	for _, n := range []int{0, 1, 255, 256, 257, 383, 384, 1000, 4096} {
		for _, off := range []int{0, 1, 31, 32, 33} {
			for _, soff := range []int{0, 5} {
				buf := make([]byte, n+off+64)
				dst := buf[off : off+n]
				CopyShared(dst, src[soff:soff+n])
				if !bytes.Equal(dst, src[soff:soff+n]) {
					t.Fatalf("n=%d off=%d soff=%d: copied wrong bytes", n, off, soff)
				}
				for _, b := range append(buf[:off:off], buf[off+n:]...) {
					if b != 0 {
						t.Fatalf("n=%d off=%d soff=%d: wrote outside dst", n, off, soff)
					}
				}
			}
		}
	}
	short := make([]byte, 10)
	CopyShared(short, src) // copies 10, as copy would
	if !bytes.Equal(short, src[:10]) {
		t.Fatal("shorter dst: not copy's bytes")
	}
}
