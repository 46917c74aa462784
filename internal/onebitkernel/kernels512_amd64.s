//go:build linux && !gocomm_portable

#include "textflag.h"

// The AVX-512 kernels of the 1-bit all-reduce (run512_amd64.go explains
// the arithmetic). They take 32 elements at a time: two vectors of 16
// float32 values, four of 8 float64.

// rev16<> reverses the 8 lanes of each half of a 16-lane vector: after it,
// mask bit 8k+i belongs to element 8k+7-i, MSB-first packing.
DATA rev16<>+0(SB)/4, $7
DATA rev16<>+4(SB)/4, $6
DATA rev16<>+8(SB)/4, $5
DATA rev16<>+12(SB)/4, $4
DATA rev16<>+16(SB)/4, $3
DATA rev16<>+20(SB)/4, $2
DATA rev16<>+24(SB)/4, $1
DATA rev16<>+28(SB)/4, $0
DATA rev16<>+32(SB)/4, $15
DATA rev16<>+36(SB)/4, $14
DATA rev16<>+40(SB)/4, $13
DATA rev16<>+44(SB)/4, $12
DATA rev16<>+48(SB)/4, $11
DATA rev16<>+52(SB)/4, $10
DATA rev16<>+56(SB)/4, $9
DATA rev16<>+60(SB)/4, $8
GLOBL rev16<>(SB), RODATA|NOPTR, $64

DATA absps<>+0(SB)/4, $0x7fffffff
GLOBL absps<>(SB), RODATA|NOPTR, $4

DATA halfps<>+0(SB)/4, $0.5
GLOBL halfps<>(SB), RODATA|NOPTR, $4

DATA oneq<>+0(SB)/8, $1
GLOBL oneq<>(SB), RODATA|NOPTR, $8

DATA ones32<>+0(SB)/8, $0xffffffff
DATA ones32<>+8(SB)/8, $0
GLOBL ones32<>(SB), RODATA|NOPTR, $16

// RUNSETUP loads the arguments common to both run kernels and the
// constants: Z31 zero, Z30 rev16<>, Z29 S0 in every lane, Z28 the OR of
// the sums (S0 at first), Z24 the units per lane (0), Z23 the threshold
// (budget-1)/8 per lane, Z22 4*bits(S0) per lane, R9 the budget, BX the
// elements done (0), CX the groups of 32.
#define RUNSETUP \
	MOVQ         x+0(FP), SI \
	MOVQ         e+8(FP), DX \
	MOVQ         bits+16(FP), DI \
	MOVQ         n+24(FP), CX \
	MOVQ         s0+32(FP), R10 \
	MOVQ         budget+40(FP), R9 \
	VPBROADCASTQ R10, Z29 \
	VMOVDQA64    Z29, Z28 \
	SHLQ         $2, R10 \
	VPBROADCASTQ R10, Z22 \
	LEAQ         -1(R9), R10 \
	SARQ         $3, R10 \
	VPBROADCASTQ R10, Z23 \
	VPXORQ       Z24, Z24, Z24 \
	VPXORD       Z31, Z31, Z31 \
	VMOVDQU32    rev16<>(SB), Z30 \
	XORQ         BX, BX \
	SHRQ         $5, CX

// GROUP reads 32 elements, forms b = x + e in Z0 (elements 0-15) and Z1
// (16-31), stores their 32 sign bits, and leaves s = fl(S0 + b*b) for
// elements 0-7, 8-15, 16-23, 24-31 in Z4, Z5, Z6, Z7.
#define GROUP \
	VMOVUPS       (SI), Z0 \
	VADDPS        (DX), Z0, Z0 \
	VMOVUPS       64(SI), Z1 \
	VADDPS        64(DX), Z1, Z1 \
	VPERMPS       Z0, Z30, Z2 \
	VCMPPS        $5, Z31, Z2, K1 \
	VPERMPS       Z1, Z30, Z3 \
	VCMPPS        $5, Z31, Z3, K2 \
	KUNPCKWD      K1, K2, K1 \
	KMOVD         K1, AX \
	MOVL          AX, (DI) \
	VCVTPS2PD     Y0, Z4 \
	VEXTRACTF32X8 $1, Z0, Y5 \
	VCVTPS2PD     Y5, Z5 \
	VCVTPS2PD     Y1, Z6 \
	VEXTRACTF32X8 $1, Z1, Y7 \
	VCVTPS2PD     Y7, Z7 \
	VFMADD213PD   Z29, Z4, Z4 \
	VFMADD213PD   Z29, Z5, Z5 \
	VFMADD213PD   Z29, Z6, Z6 \
	VFMADD213PD   Z29, Z7, Z7

// UNITS sets Z9 to the units per lane with the group's added (bits(s) -
// bits(S0) for each of its four elements).
#define UNITS \
	VPADDQ Z5, Z4, Z8 \
	VPADDQ Z7, Z6, Z9 \
	VPADDQ Z9, Z8, Z8 \
	VPSUBQ Z22, Z8, Z8 \
	VPADDQ Z8, Z24, Z9

// CHECK goes on to the label ok when every lane of Z9 is at most the
// threshold (so the total is below the budget), else falls through.
#define CHECK(ok) \
	VPCMPQ   $6, Z23, Z9, K1 \
	KORTESTB K1, K1 \
	JZ       ok

// HSUM adds the 8 lanes of Z9 into AX.
#define HSUM \
	VEXTRACTI64X4 $1, Z9, Y8 \
	VPADDQ        Y8, Y9, Y8 \
	VEXTRACTI128  $1, Y8, X10 \
	VPADDQ        X10, X8, X8 \
	VPSHUFD       $0x4e, X8, X10 \
	VPADDQ        X10, X8, X8 \
	VMOVQ         X8, AX

// COMMIT keeps the group: Z9 becomes the units, its sums go into Z28's
// OR, and the pointers step.
#define COMMIT \
	VMOVDQA64  Z9, Z24 \
	VPTERNLOGQ $0xfe, Z5, Z4, Z28 \
	VPTERNLOGQ $0xfe, Z7, Z6, Z28 \
	ADDQ       $128, SI \
	ADDQ       $128, DX \
	ADDQ       $4, DI \
	ADDQ       $32, BX

// RUNDONE returns done (BX), k (the lanes of Z24 added) and ok: every sum
// kept had S0's sign and exponent (Z28, their OR, has S0's top 12 bits).
#define RUNDONE(doneOff, kOff, okOff) \
	VMOVDQA64 Z24, Z9 \
	HSUM \
	MOVQ      AX, kOff(FP) \
	VPXORQ    Z29, Z28, Z28 \
	VPSRLQ    $52, Z28, Z28 \
	VPTESTMQ  Z28, Z28, K1 \
	KORTESTB  K1, K1 \
	SETEQ     AX \
	VZEROUPPER \
	MOVQ      BX, doneOff(FP) \
	MOVB      AX, okOff(FP) \
	RET

// func compressRunEvenAVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64) (done int, k int64, ok bool)
TEXT ·compressRunEvenAVX512(SB), NOSPLIT, $0-65
	RUNSETUP
	TESTQ CX, CX
	JZ    evenRunDone

evenRunLoop:
	GROUP
	UNITS
	CHECK(evenRunKeep)
	// some lane is past the threshold: add up exactly
	HSUM
	CMPQ AX, R9
	JGE  evenRunDone

evenRunKeep:
	COMMIT
	DECQ CX
	JNZ  evenRunLoop

evenRunDone:
	RUNDONE(done+48, k+56, ok+64)

// func compressRunOddAVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64, hscale float32, parity uint64) (done int, k int64, ok bool)
//
// R11 is the unit count's parity at the group's start (in bit 0), R10 the
// count of odd units in the group.
TEXT ·compressRunOddAVX512(SB), NOSPLIT, $0-81
	RUNSETUP
	VBROADCASTSS hscale+48(FP), Z27
	VBROADCASTSS halfps<>(SB), Z26
	VPBROADCASTQ oneq<>(SB), Z25
	VMOVDQU      ones32<>(SB), X13
	MOVQ         parity+56(FP), R11
	TESTQ        CX, CX
	JZ           oddRunDone

oddRunLoop:
	GROUP
	// T (R12): the ties, h = |b|*hscale with h - floor(h) = 1/2 (exact
	// for h >= 0; for h < 0 it would be rounded, and 1/2 by accident)
	VANDPS.BCST absps<>(SB), Z0, Z10
	VMULPS    Z27, Z10, Z10
	VREDUCEPS $9, Z10, Z10
	VCMPPS    $0, Z26, Z10, K3
	VANDPS.BCST absps<>(SB), Z1, Z11
	VMULPS    Z27, Z11, Z11
	VREDUCEPS $9, Z11, Z11
	VCMPPS    $0, Z26, Z11, K4
	KUNPCKWD  K3, K4, K3
	KMOVD     K3, R12
	// Q (R13): the parities of the units rounded to even, bit 0 of s
	VPTESTMQ  Z25, Z4, K4
	VPTESTMQ  Z25, Z5, K5
	VPTESTMQ  Z25, Z6, K6
	VPTESTMQ  Z25, Z7, K7
	KUNPCKBW  K4, K5, K4
	KUNPCKBW  K6, K7, K6
	KUNPCKWD  K4, K6, K4
	KMOVD     K4, R13
	POPCNTQ   R13, R10
	// A0 (R13): bit i the parity of the units of the elements before i
	// in the group (prefix XOR: a carry-less product with 2^32-1, shifted)
	VMOVQ      R13, X12
	VPCLMULQDQ $0, X13, X12, X12
	VMOVQ      X12, R13
	SHLQ       $1, R13
	// F0: the ties whose parity before them, counted from the tie before
	// (or from the group's start taken as even), is odd: they take the
	// odd neighbour, one unit up. c = A0 at the ties, f = c ^ c<<1.
	PEXTQ      R12, R13, R13
	MOVQ       R13, R14
	SHLQ       $1, R14
	XORQ       R14, R13
	PDEPQ      R12, R13, R13
	// an odd count at the start flips the first tie's choice
	BLSIQ      R12, R14
	XORQ       R13, R14
	POPCNTQ    R13, R13
	POPCNTQ    R14, R14
	TESTQ      $1, R11
	CMOVQNE    R14, R13
	// R13: the ties taken one unit up, added to lane 0
	VMOVQ      R13, X10
	UNITS
	VPADDQ     Z10, Z9, Z9
	CHECK(oddRunKeep)
	HSUM
	CMPQ AX, R9
	JGE  oddRunDone

oddRunKeep:
	// the parity at the next group's start: the units' and the ties' up
	ADDQ R13, R11
	ADDQ R10, R11
	COMMIT
	DECQ CX
	JNZ  oddRunLoop

oddRunDone:
	RUNDONE(done+64, k+72, ok+80)

// The kernels of 64 elements a time. They form the signs without mask
// registers in the inner work (mask operations were their bottleneck):
// min(b, +0) is negative exactly when b < 0 (for -0 and NaN, VMINPS gives
// its second operand, +0), the saturating packs keep each value's sign
// while they narrow four vectors of 16 to one of 64 bytes, and sidx<>
// puts the bytes in MSB-first order for one VPMOVB2M. The packs leave
// byte 16L+4v+j holding element 16v+4L+j (L the 128-bit lane, v the
// vector); sidx<> byte o picks element 8(o/8)+7-o%8 from there.
DATA sidx<>+0(SB)/8, $0x0001020310111213
DATA sidx<>+8(SB)/8, $0x2021222330313233
DATA sidx<>+16(SB)/8, $0x0405060714151617
DATA sidx<>+24(SB)/8, $0x2425262734353637
DATA sidx<>+32(SB)/8, $0x08090a0b18191a1b
DATA sidx<>+40(SB)/8, $0x28292a2b38393a3b
DATA sidx<>+48(SB)/8, $0x0c0d0e0f1c1d1e1f
DATA sidx<>+56(SB)/8, $0x2c2d2e2f3c3d3e3f
GLOBL sidx<>(SB), RODATA|NOPTR, $64

// qidx<> gathers byte 0 of every float64 lane of two vectors (elements
// 16k to 16k+15 when they hold 8 each) into 16 bytes, in every 128-bit
// lane; qsel1<> and qsel2<> then pick lane k from pair k (VPTERNLOG $0xd8:
// the selector's set bits take the second operand).
DATA qidx<>+0(SB)/8, $0x3830282018100800
DATA qidx<>+8(SB)/8, $0x7870686058504840
DATA qidx<>+16(SB)/8, $0x3830282018100800
DATA qidx<>+24(SB)/8, $0x7870686058504840
DATA qidx<>+32(SB)/8, $0x3830282018100800
DATA qidx<>+40(SB)/8, $0x7870686058504840
DATA qidx<>+48(SB)/8, $0x3830282018100800
DATA qidx<>+56(SB)/8, $0x7870686058504840
GLOBL qidx<>(SB), RODATA|NOPTR, $64
DATA qsel1<>+0(SB)/8, $0x0000000000000000
DATA qsel1<>+8(SB)/8, $0x0000000000000000
DATA qsel1<>+16(SB)/8, $0xffffffffffffffff
DATA qsel1<>+24(SB)/8, $0xffffffffffffffff
DATA qsel1<>+32(SB)/8, $0x0000000000000000
DATA qsel1<>+40(SB)/8, $0x0000000000000000
DATA qsel1<>+48(SB)/8, $0xffffffffffffffff
DATA qsel1<>+56(SB)/8, $0xffffffffffffffff
GLOBL qsel1<>(SB), RODATA|NOPTR, $64
DATA qsel2<>+0(SB)/8, $0x0000000000000000
DATA qsel2<>+8(SB)/8, $0x0000000000000000
DATA qsel2<>+16(SB)/8, $0x0000000000000000
DATA qsel2<>+24(SB)/8, $0x0000000000000000
DATA qsel2<>+32(SB)/8, $0xffffffffffffffff
DATA qsel2<>+40(SB)/8, $0xffffffffffffffff
DATA qsel2<>+48(SB)/8, $0xffffffffffffffff
DATA qsel2<>+56(SB)/8, $0xffffffffffffffff
GLOBL qsel2<>(SB), RODATA|NOPTR, $64

DATA bytes01<>+0(SB)/4, $0x01010101
GLOBL bytes01<>(SB), RODATA|NOPTR, $4

// PREFIXXOR(r, tmp) sets bit i of r to the XOR of its bits 0 to i: six
// shift-and-XOR steps in general registers (as fast here as a carry-less
// product, without the trips to a vector register and back).
#define PREFIXXOR(r, tmp) \
	MOVQ r, tmp \
	SHLQ $1, tmp \
	XORQ tmp, r \
	MOVQ r, tmp \
	SHLQ $2, tmp \
	XORQ tmp, r \
	MOVQ r, tmp \
	SHLQ $4, tmp \
	XORQ tmp, r \
	MOVQ r, tmp \
	SHLQ $8, tmp \
	XORQ tmp, r \
	MOVQ r, tmp \
	SHLQ $16, tmp \
	XORQ tmp, r \
	MOVQ r, tmp \
	SHLQ $32, tmp \
	XORQ tmp, r

// SETUP64 is RUNSETUP for 64 elements a time: CX the groups of 64, Z22
// 8*bits(S0), Z30 sidx<>.
#define SETUP64 \
	RUNSETUP \
	SHRQ      $1, CX \
	VPADDQ    Z22, Z22, Z22 \
	VMOVDQU64 sidx<>(SB), Z30

// CVT64 reads 64 elements: b = x + e in Z0-Z3 (16 each), and b in float64
// for elements 8i to 8i+7 in Z(8+i).
#define CVT64 \
	VMOVUPS       0(SI), Z0 \
	VADDPS        0(DX), Z0, Z0 \
	VMOVUPS       64(SI), Z1 \
	VADDPS        64(DX), Z1, Z1 \
	VMOVUPS       128(SI), Z2 \
	VADDPS        128(DX), Z2, Z2 \
	VMOVUPS       192(SI), Z3 \
	VADDPS        192(DX), Z3, Z3 \
	VCVTPS2PD     Y0, Z8 \
	VEXTRACTF32X8 $1, Z0, Y9 \
	VCVTPS2PD     Y9, Z9 \
	VCVTPS2PD     Y1, Z10 \
	VEXTRACTF32X8 $1, Z1, Y11 \
	VCVTPS2PD     Y11, Z11 \
	VCVTPS2PD     Y2, Z12 \
	VEXTRACTF32X8 $1, Z2, Y13 \
	VCVTPS2PD     Y13, Z13 \
	VCVTPS2PD     Y3, Z14 \
	VEXTRACTF32X8 $1, Z3, Y15 \
	VCVTPS2PD     Y15, Z15

// LOAD64 is CVT64 that leaves s = fl(S0 + b*b) for elements 8i to 8i+7
// in Z(8+i).
#define LOAD64 \
	CVT64 \
	VFMADD213PD   Z29, Z8, Z8 \
	VFMADD213PD   Z29, Z9, Z9 \
	VFMADD213PD   Z29, Z10, Z10 \
	VFMADD213PD   Z29, Z11, Z11 \
	VFMADD213PD   Z29, Z12, Z12 \
	VFMADD213PD   Z29, Z13, Z13 \
	VFMADD213PD   Z29, Z14, Z14 \
	VFMADD213PD   Z29, Z15, Z15

// SIGNS64 stores the 64 sign bits of Z0-Z3, MSB first (clobbers Z4, Z5,
// Z16, Z17, K1, AX).
#define SIGNS64 \
	VMINPS    Z31, Z0, Z4 \
	VMINPS    Z31, Z1, Z5 \
	VMINPS    Z31, Z2, Z16 \
	VMINPS    Z31, Z3, Z17 \
	VPACKSSDW Z5, Z4, Z4 \
	VPACKSSDW Z17, Z16, Z16 \
	VPACKSSWB Z16, Z4, Z4 \
	VPERMB    Z4, Z30, Z4 \
	VPMOVB2M  Z4, K1 \
	KMOVQ     K1, AX \
	NOTQ      AX \
	MOVQ      AX, (DI)

// SUMS64 sets Z4|Z5 to the OR of the group's sums (Z4 alone: of its first
// 32 elements), Z6 to the units per lane with the group's, and Z16 to the
// sums per lane of its first 32 elements (clobbers Z17, Z18).
#define SUMS64 \
	VPORQ      Z8, Z9, Z4 \
	VPTERNLOGQ $0xfe, Z10, Z11, Z4 \
	VPORQ      Z12, Z13, Z5 \
	VPTERNLOGQ $0xfe, Z14, Z15, Z5 \
	VPADDQ     Z9, Z8, Z16 \
	VPADDQ     Z11, Z10, Z17 \
	VPADDQ     Z13, Z12, Z18 \
	VPADDQ     Z15, Z14, Z6 \
	VPADDQ     Z17, Z16, Z16 \
	VPADDQ     Z6, Z18, Z18 \
	VPADDQ     Z18, Z16, Z17 \
	VPSUBQ     Z22, Z17, Z17 \
	VPADDQ     Z17, Z24, Z6

// HALF64(fail) tries the first 32 elements of a group refused whole, from
// Z16 (SUMS64): their units per lane with the committed ones in Z9, their
// total in AX, plus R10 (their ties taken up); if that is below the budget
// it keeps them, else jumps to fail.
#define HALF64(fail) \
	VPSRLQ     $1, Z22, Z9 \
	VPSUBQ     Z9, Z16, Z9 \
	VPADDQ     Z24, Z9, Z9 \
	HSUM \
	ADDQ       R10, AX \
	CMPQ       AX, R9 \
	JGE        fail \
	SUBQ       R10, R9 \
	VMOVDQA64  Z9, Z24 \
	VPORQ      Z4, Z28, Z28 \
	ADDQ       $32, BX

// COMMIT64 keeps the group's units and sums and steps the pointers.
#define COMMIT64 \
	VMOVDQA64  Z6, Z24 \
	VPTERNLOGQ $0xfe, Z4, Z5, Z28 \
	ADDQ       $256, SI \
	ADDQ       $256, DX \
	ADDQ       $8, DI \
	ADDQ       $64, BX

// func compressRunEven64AVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64) (done int, k int64, ok bool)
//
// compressRunEven64AVX512 is compressRunEvenAVX512 64 elements at a time
// (n a multiple of 64), stopping before a group of 64 that would reach the
// budget, or after its first 32 elements when they do not.
TEXT ·compressRunEven64AVX512(SB), NOSPLIT, $0-65
	SETUP64
	TESTQ CX, CX
	JZ    even64Done

even64Loop:
	LOAD64
	SIGNS64
	SUMS64
	VPCMPQ   $6, Z23, Z6, K1
	KORTESTB K1, K1
	JZ       even64Keep
	VMOVDQA64 Z6, Z9
	HSUM
	CMPQ AX, R9
	JGE  even64Half

even64Keep:
	COMMIT64
	DECQ CX
	JNZ  even64Loop

even64Done:
	RUNDONE(done+48, k+56, ok+64)

even64Half:
	XORQ R10, R10
	HALF64(even64Done)
	JMP  even64Done

// func compressRunOdd64AVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64, hscale float32, parity uint64) (done int, k int64, ok bool)
//
// compressRunOdd64AVX512 is compressRunOddAVX512 64 elements at a time (n
// a multiple of 64). It stops before the first group of 64 that would
// reach the budget, or after its first 32 elements when they do not.
//
// The ties of a group: T (R12) and Q (R13) as in compressRunOddAVX512, Q
// gathered from byte 0 of the sums by byte permutes (qidx<>) and one
// VPTESTMB instead of eight mask tests. The ties taken up are counted in
// general registers, apart from the vector units: with D (R11) the unit
// count's parity at the group's start, A0 the exclusive prefix XOR of Q
// (PREFIXXOR of Q<<1), c0 = PEXT(A0, T) and u = c0<<1 | D, the ties
// that take the odd neighbour are the set bits among the low popcount(T)
// of c0 ^ u (the parity before a tie is the XOR of the Q since the tie
// before it, or D and the Q before it for the first), and the parity at
// the next group's start is bit 0 of popcount(Q) ^ c0's bit popcount(T)-1
// (the Q after the last tie), or of popcount(Q) ^ D when there is no tie.
// (A group of 64 ties is possible: u >> 64 would not do.) Only D carries from one group
// to the next. R9 counts down the budget by the ties taken up, and the
// lanes' threshold leaves room for n of them, so the vector check needs
// no scalar result; k adds them back at the end.
TEXT ·compressRunOdd64AVX512(SB), NOSPLIT, $0-81
	SETUP64
	// the threshold: (budget - 1 - n)/8, room for up to n ties taken up
	MOVQ         n+24(FP), R10
	LEAQ         -1(R9), AX
	SUBQ         R10, AX
	SARQ         $3, AX
	VPBROADCASTQ AX, Z23
	VBROADCASTSS hscale+48(FP), Z27
	VBROADCASTSS halfps<>(SB), Z26
	VMOVDQU64    qidx<>(SB), Z25
	VMOVDQU64    qsel1<>(SB), Z21
	VMOVDQU64    qsel2<>(SB), Z20
	VPBROADCASTD bytes01<>(SB), Z19
	MOVQ         parity+56(FP), R11
	TESTQ        CX, CX
	JZ           odd64Done

odd64Loop:
	LOAD64
	SIGNS64
	// T (R12): the ties, h = |b|*hscale with h - floor(h) = 1/2 (exact
	// for h >= 0; for h < 0 it would be rounded, and 1/2 by accident)
	VANDPS.BCST absps<>(SB), Z0, Z4
	VMULPS      Z27, Z4, Z4
	VREDUCEPS   $9, Z4, Z4
	VCMPPS      $0, Z26, Z4, K1
	VANDPS.BCST absps<>(SB), Z1, Z5
	VMULPS      Z27, Z5, Z5
	VREDUCEPS   $9, Z5, Z5
	VCMPPS      $0, Z26, Z5, K2
	VANDPS.BCST absps<>(SB), Z2, Z4
	VMULPS      Z27, Z4, Z4
	VREDUCEPS   $9, Z4, Z4
	VCMPPS      $0, Z26, Z4, K3
	VANDPS.BCST absps<>(SB), Z3, Z5
	VMULPS      Z27, Z5, Z5
	VREDUCEPS   $9, Z5, Z5
	VCMPPS      $0, Z26, Z5, K4
	KUNPCKWD    K1, K2, K1
	KUNPCKWD    K3, K4, K3
	KUNPCKDQ    K1, K3, K1
	KMOVQ       K1, R12
	SUMS64
	// Q (R13): bit 0 of byte 0 of every sum, in element order
	VPERMT2B   Z9, Z25, Z8
	VPERMT2B   Z11, Z25, Z10
	VPERMT2B   Z13, Z25, Z12
	VPERMT2B   Z15, Z25, Z14
	VPTERNLOGQ $0xd8, Z21, Z10, Z8
	VPTERNLOGQ $0xd8, Z21, Z14, Z12
	VPTERNLOGQ $0xd8, Z20, Z12, Z8
	VPTESTMB   Z19, Z8, K1
	KMOVQ      K1, R13
	// R10: the ties taken up; R14: D for the next group
	LEAQ       (R13)(R13*1), AX
	PREFIXXOR(AX, R8)
	POPCNTQ    R12, R8
	PEXTQ      R12, AX, AX
	// R14: c0 at the group's last tie (bit k-1, k = popcount(T) = 64
	// included), or D when the group has none
	LEAQ       -1(R8), R10
	SHRXQ      R10, AX, R14
	TESTQ      R8, R8
	CMOVQEQ    R11, R14
	LEAQ       (R11)(AX*2), R10
	XORQ       R10, AX
	BZHIQ      R8, AX, R10
	POPCNTQ    R10, R10
	POPCNTQ    R13, R8
	XORQ       R8, R14
	ANDQ       $1, R14
	VPCMPQ     $6, Z23, Z6, K1
	KORTESTB   K1, K1
	JZ         odd64Keep
	// some lane is past the threshold: add up exactly, ties included
	VMOVDQA64  Z6, Z9
	HSUM
	ADDQ       R10, AX
	CMPQ       AX, R9
	JGE        odd64Half

odd64Keep:
	MOVQ R14, R11
	SUBQ R10, R9
	COMMIT64
	DECQ CX
	JNZ  odd64Loop

	JMP  odd64Done

odd64Half:
	// the first 32 elements alone: their ties taken up (R10) as above
	// with T cut to them
	LEAQ    (R13)(R13*1), AX
	PREFIXXOR(AX, R8)
	MOVL    R12, R12
	POPCNTQ R12, R8
	PEXTQ   R12, AX, AX
	LEAQ    (R11)(AX*2), R14
	XORQ    R14, AX
	BZHIQ   R8, AX, R10
	POPCNTQ R10, R10
	HALF64(odd64Done)

odd64Done:
	// k: the lanes' units and the ties taken up (budget - R9)
	VMOVDQA64 Z24, Z9
	HSUM
	ADDQ      budget+40(FP), AX
	SUBQ      R9, AX
	MOVQ      AX, k+72(FP)
	VPXORQ    Z29, Z28, Z28
	VPSRLQ    $52, Z28, Z28
	VPTESTMQ  Z28, Z28, K1
	KORTESTB  K1, K1
	SETEQ     AX
	VZEROUPPER
	MOVQ      BX, done+64(FP)
	MOVB      AX, ok+80(FP)
	RET

// func compressFast64AVX512(x, e *float32, bits *byte, n int) float64
//
// compressFast64AVX512 forms the signs of n elements (a multiple of 64)
// as compressRunEven64AVX512 does and sums their squares in eight partial
// sums of eight lanes each, in no fixed order (scale.go): CVT64, then
// the squares added to the partial sums Z18-Z25.
TEXT ·compressFast64AVX512(SB), NOSPLIT, $0-40
	MOVQ      x+0(FP), SI
	MOVQ      e+8(FP), DX
	MOVQ      bits+16(FP), DI
	MOVQ      n+24(FP), CX
	SHRQ      $6, CX
	VPXORD    Z31, Z31, Z31
	VMOVDQU64 sidx<>(SB), Z30
	VPXORQ    Z18, Z18, Z18
	VPXORQ    Z19, Z19, Z19
	VPXORQ    Z20, Z20, Z20
	VPXORQ    Z21, Z21, Z21
	VPXORQ    Z22, Z22, Z22
	VPXORQ    Z23, Z23, Z23
	VPXORQ    Z24, Z24, Z24
	VPXORQ    Z25, Z25, Z25
	TESTQ     CX, CX
	JZ        fast64Done

fast64Loop:
	CVT64
	VFMADD231PD   Z8, Z8, Z18
	VFMADD231PD   Z9, Z9, Z19
	VFMADD231PD   Z10, Z10, Z20
	VFMADD231PD   Z11, Z11, Z21
	VFMADD231PD   Z12, Z12, Z22
	VFMADD231PD   Z13, Z13, Z23
	VFMADD231PD   Z14, Z14, Z24
	VFMADD231PD   Z15, Z15, Z25
	SIGNS64
	ADDQ          $256, SI
	ADDQ          $256, DX
	ADDQ          $8, DI
	DECQ          CX
	JNZ           fast64Loop

fast64Done:
	VADDPD        Z19, Z18, Z18
	VADDPD        Z21, Z20, Z20
	VADDPD        Z23, Z22, Z22
	VADDPD        Z25, Z24, Z24
	VADDPD        Z20, Z18, Z18
	VADDPD        Z24, Z22, Z22
	VADDPD        Z22, Z18, Z18
	VEXTRACTF64X4 $1, Z18, Y1
	VADDPD        Y1, Y18, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPD        X1, X0, X0
	VPERMILPD     $1, X0, X1
	VADDSD        X1, X0, X0
	VZEROUPPER
	MOVSD         X0, ret+32(FP)
	RET
