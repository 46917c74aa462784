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

DATA ones64<>+0(SB)/8, $-1
DATA ones64<>+8(SB)/8, $0
GLOBL ones64<>(SB), RODATA|NOPTR, $16


// func compressRunOdd64AVX512(x, e *float32, bits *byte, n int, s0 uint64, budget int64, hscale float32, parity uint64) (done int, k int64, ok bool)
//
// compressRunOdd64AVX512 is compressRunOddAVX512 64 elements at a time (n
// a multiple of 64): the tie decisions, a few scalar instructions per
// group, are shared by twice the elements. It stops before the first
// group of 64 that would reach the budget. Z0-Z3 hold b, Z8-Z15 the sums
// s, R11 the parity at the group's start, R10 the group's odd units.
TEXT ·compressRunOdd64AVX512(SB), NOSPLIT, $0-81
	RUNSETUP
	SHRQ         $1, CX
	VPADDQ       Z22, Z22, Z22
	VBROADCASTSS hscale+48(FP), Z27
	VBROADCASTSS halfps<>(SB), Z26
	VPBROADCASTQ oneq<>(SB), Z25
	VMOVDQU      ones64<>(SB), X7
	MOVQ         parity+56(FP), R11
	TESTQ        CX, CX
	JZ           odd64Done

odd64Loop:
	VMOVUPS       0(SI), Z0
	VADDPS        0(DX), Z0, Z0
	VMOVUPS       64(SI), Z1
	VADDPS        64(DX), Z1, Z1
	VCVTPS2PD     Y0, Z8
	VEXTRACTF32X8 $1, Z0, Y9
	VCVTPS2PD     Y9, Z9
	VCVTPS2PD     Y1, Z10
	VEXTRACTF32X8 $1, Z1, Y11
	VCVTPS2PD     Y11, Z11
	VFMADD213PD   Z29, Z8, Z8
	VFMADD213PD   Z29, Z9, Z9
	VFMADD213PD   Z29, Z10, Z10
	VFMADD213PD   Z29, Z11, Z11
	VMOVUPS       128(SI), Z2
	VADDPS        128(DX), Z2, Z2
	VMOVUPS       192(SI), Z3
	VADDPS        192(DX), Z3, Z3
	VCVTPS2PD     Y2, Z12
	VEXTRACTF32X8 $1, Z2, Y13
	VCVTPS2PD     Y13, Z13
	VCVTPS2PD     Y3, Z14
	VEXTRACTF32X8 $1, Z3, Y15
	VCVTPS2PD     Y15, Z15
	VFMADD213PD   Z29, Z12, Z12
	VFMADD213PD   Z29, Z13, Z13
	VFMADD213PD   Z29, Z14, Z14
	VFMADD213PD   Z29, Z15, Z15
	// signs, MSB first
	VPERMPS   Z0, Z30, Z4
	VCMPPS    $5, Z31, Z4, K1
	VPERMPS   Z1, Z30, Z5
	VCMPPS    $5, Z31, Z5, K2
	VPERMPS   Z2, Z30, Z4
	VCMPPS    $5, Z31, Z4, K3
	VPERMPS   Z3, Z30, Z5
	VCMPPS    $5, Z31, Z5, K4
	KUNPCKWD  K1, K2, K1
	KUNPCKWD  K3, K4, K3
	KUNPCKDQ  K1, K3, K1
	KMOVQ     K1, AX
	MOVQ      AX, (DI)
	// T (R12): the ties, h = |b|*hscale with h - floor(h) = 1/2 (exact
	// for h >= 0; for h < 0 it would be rounded, and 1/2 by accident)
	VANDPS.BCST absps<>(SB), Z0, Z4
	VMULPS    Z27, Z4, Z4
	VREDUCEPS $9, Z4, Z4
	VCMPPS    $0, Z26, Z4, K1
	VANDPS.BCST absps<>(SB), Z1, Z5
	VMULPS    Z27, Z5, Z5
	VREDUCEPS $9, Z5, Z5
	VCMPPS    $0, Z26, Z5, K2
	VANDPS.BCST absps<>(SB), Z2, Z4
	VMULPS    Z27, Z4, Z4
	VREDUCEPS $9, Z4, Z4
	VCMPPS    $0, Z26, Z4, K3
	VANDPS.BCST absps<>(SB), Z3, Z5
	VMULPS    Z27, Z5, Z5
	VREDUCEPS $9, Z5, Z5
	VCMPPS    $0, Z26, Z5, K4
	KUNPCKWD  K1, K2, K1
	KUNPCKWD  K3, K4, K3
	KUNPCKDQ  K1, K3, K1
	KMOVQ     K1, R12
	// Q (R13): the parities of the units rounded to even, bit 0 of s
	VPTESTMQ  Z25, Z8, K1
	VPTESTMQ  Z25, Z9, K2
	KUNPCKBW  K1, K2, K1
	VPTESTMQ  Z25, Z10, K2
	VPTESTMQ  Z25, Z11, K3
	KUNPCKBW  K2, K3, K2
	KUNPCKWD  K1, K2, K1
	VPTESTMQ  Z25, Z12, K2
	VPTESTMQ  Z25, Z13, K3
	KUNPCKBW  K2, K3, K2
	VPTESTMQ  Z25, Z14, K3
	VPTESTMQ  Z25, Z15, K4
	KUNPCKBW  K3, K4, K3
	KUNPCKWD  K2, K3, K2
	KUNPCKDQ  K1, K2, K1
	KMOVQ     K1, R13
	POPCNTQ   R13, R10
	// A0, F0 and the ties taken up, as in compressRunOddAVX512
	VMOVQ      R13, X6
	VPCLMULQDQ $0, X7, X6, X6
	VMOVQ      X6, R13
	SHLQ       $1, R13
	PEXTQ      R12, R13, R13
	MOVQ       R13, R14
	SHLQ       $1, R14
	XORQ       R14, R13
	PDEPQ      R12, R13, R13
	BLSIQ      R12, R14
	XORQ       R13, R14
	POPCNTQ    R13, R13
	POPCNTQ    R14, R14
	TESTQ      $1, R11
	CMOVQNE    R14, R13
	VMOVQ      R13, X6
	// the group's sums ORed, for Z28 if it is kept
	VPORQ      Z8, Z9, Z20
	VPTERNLOGQ $0xfe, Z10, Z11, Z20
	VPORQ      Z12, Z13, Z21
	VPTERNLOGQ $0xfe, Z14, Z15, Z21
	// the units per lane with the group's
	VPADDQ     Z9, Z8, Z16
	VPADDQ     Z11, Z10, Z17
	VPADDQ     Z13, Z12, Z18
	VPADDQ     Z15, Z14, Z19
	VPADDQ     Z17, Z16, Z16
	VPADDQ     Z19, Z18, Z18
	VPADDQ     Z18, Z16, Z16
	VPSUBQ     Z22, Z16, Z16
	VPADDQ     Z6, Z16, Z16
	VPADDQ     Z16, Z24, Z9
	CHECK(odd64Keep)
	HSUM
	CMPQ AX, R9
	JGE  odd64Done

odd64Keep:
	ADDQ       R13, R11
	ADDQ       R10, R11
	VMOVDQA64  Z9, Z24
	VPTERNLOGQ $0xfe, Z20, Z21, Z28
	ADDQ       $256, SI
	ADDQ       $256, DX
	ADDQ       $8, DI
	ADDQ       $64, BX
	DECQ       CX
	JNZ        odd64Loop

odd64Done:
	RUNDONE(done+64, k+72, ok+80)
