//go:build linux && !gocomm_portable

#include "textflag.h"

// The AVX2 kernels of the 1-bit all-reduce. Each handles n elements (n a
// multiple of 8), one byte of MSB-first signs per 8 elements, and computes
// exactly what the Go loops in loops.go compute.

// reverse<> permutes 8 lanes into reverse order: after it, VMOVMSKPS puts
// element i's bit at bit 7-i, MSB-first packing.
DATA reverse<>+0(SB)/4, $7
DATA reverse<>+4(SB)/4, $6
DATA reverse<>+8(SB)/4, $5
DATA reverse<>+12(SB)/4, $4
DATA reverse<>+16(SB)/4, $3
DATA reverse<>+20(SB)/4, $2
DATA reverse<>+24(SB)/4, $1
DATA reverse<>+28(SB)/4, $0
GLOBL reverse<>(SB), RODATA|NOPTR, $32

// lanebit<> is element i's bit in its byte of signs, 0x80 >> i.
DATA lanebit<>+0(SB)/4, $0x80
DATA lanebit<>+4(SB)/4, $0x40
DATA lanebit<>+8(SB)/4, $0x20
DATA lanebit<>+12(SB)/4, $0x10
DATA lanebit<>+16(SB)/4, $0x08
DATA lanebit<>+20(SB)/4, $0x04
DATA lanebit<>+24(SB)/4, $0x02
DATA lanebit<>+28(SB)/4, $0x01
GLOBL lanebit<>(SB), RODATA|NOPTR, $32

// SIGNED(ptr, dst) loads the byte of signs at ptr and sets dst to pos (Y10)
// in the lanes whose bit is set and neg (Y11) in the others; Y14 holds
// lanebit<>. Clobbers AX and Y1.
#define SIGNED(ptr, dst) \
	MOVBLZX      ptr, AX \
	VMOVD        AX, X1 \
	VPBROADCASTD X1, Y1 \
	VPAND        Y14, Y1, Y1 \
	VPCMPEQD     Y14, Y1, Y1 \
	VBLENDVPS    Y1, Y10, Y11, dst

// SUMSQ(src, lo) squares the four float64 lanes of src (lo is its low
// half) and adds them to X8 one lane after another, in index order, as the
// Go loop does. Only these adds depend on each other; the lane extractions
// run ahead of them.
#define SUMSQ(src, lo) \
	VMULPD       src, src, src \
	VADDSD       lo, X8, X8 \
	VPERMILPD    $1, lo, X5 \
	VADDSD       X5, X8, X8 \
	VEXTRACTF128 $1, src, X6 \
	VADDSD       X6, X8, X8 \
	VPERMILPD    $1, X6, X7 \
	VADDSD       X7, X8, X8

// func compressAVX2(x, e *float32, bits *byte, n int, sum float64) float64
TEXT ·compressAVX2(SB), NOSPLIT, $0-48
	MOVQ    x+0(FP), SI
	MOVQ    e+8(FP), DX
	MOVQ    bits+16(FP), DI
	MOVQ    n+24(FP), CX
	SHRQ    $3, CX
	VMOVSD  sum+32(FP), X8
	VXORPS  Y15, Y15, Y15
	VMOVDQU reverse<>(SB), Y13
	TESTQ   CX, CX
	JZ      compressDone

compressLoop:
	// b = x + e
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	// byte of signs: bit 7-i set unless b[i] < 0 (ordered, so NaN and -0
	// give a set bit)
	VPERMPS   Y0, Y13, Y2
	VCMPPS    $1, Y15, Y2, Y2
	VMOVMSKPS Y2, AX
	NOTL      AX
	MOVB      AX, (DI)
	// squares in float64, summed in order
	VCVTPS2PD    X0, Y3
	VEXTRACTF128 $1, Y0, X4
	VCVTPS2PD    X4, Y4
	SUMSQ(Y3, X3)
	SUMSQ(Y4, X4)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ DI
	DECQ CX
	JNZ  compressLoop

compressDone:
	VZEROUPPER
	MOVSD X8, ret+40(FP)
	RET

// func compressCrossAVX2(x, e *float32, bits *byte, n int, sum float64) (s float64, done int)
//
// compressCrossAVX2 is compressAVX2 that stops after the byte of signs in
// which the sum's exponent changes: the crossing of a binade, in one call.
TEXT ·compressCrossAVX2(SB), NOSPLIT, $0-56
	MOVQ    x+0(FP), SI
	MOVQ    e+8(FP), DX
	MOVQ    bits+16(FP), DI
	MOVQ    n+24(FP), CX
	SHRQ    $3, CX
	VMOVSD  sum+32(FP), X8
	MOVQ    sum+32(FP), R10
	SHRQ    $52, R10
	XORQ    BX, BX
	VXORPS  Y15, Y15, Y15
	VMOVDQU reverse<>(SB), Y13
	TESTQ   CX, CX
	JZ      crossDone

crossLoop:
	VMOVUPS      (SI), Y0
	VADDPS       (DX), Y0, Y0
	VPERMPS      Y0, Y13, Y2
	VCMPPS       $1, Y15, Y2, Y2
	VMOVMSKPS    Y2, AX
	NOTL         AX
	MOVB         AX, (DI)
	VCVTPS2PD    X0, Y3
	VEXTRACTF128 $1, Y0, X4
	VCVTPS2PD    X4, Y4
	SUMSQ(Y3, X3)
	SUMSQ(Y4, X4)
	ADDQ         $32, SI
	ADDQ         $32, DX
	INCQ         DI
	ADDQ         $8, BX
	VMOVQ        X8, AX
	SHRQ         $52, AX
	CMPQ         AX, R10
	JNE          crossDone
	DECQ         CX
	JNZ          crossLoop

crossDone:
	VZEROUPPER
	MOVSD X8, s+40(FP)
	MOVQ  BX, done+48(FP)
	RET

DATA half<>+0(SB)/8, $0.5
GLOBL half<>(SB), RODATA|NOPTR, $8

DATA absmask<>+0(SB)/8, $0x7fffffffffffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $8

DATA magic<>+0(SB)/8, $0x4330000000000000
GLOBL magic<>(SB), RODATA|NOPTR, $8

// lanebitpd<> is lane i's bit in a mask of four float64 lanes, 1 << i.
DATA lanebitpd<>+0(SB)/8, $1
DATA lanebitpd<>+8(SB)/8, $2
DATA lanebitpd<>+16(SB)/8, $4
DATA lanebitpd<>+24(SB)/8, $8
GLOBL lanebitpd<>(SB), RODATA|NOPTR, $32

// UNITS(src, r) squares the four float64 lanes of src, scales them by 1/u
// (Y12, a power of two: exact) into y, left in src, and sets r to y
// rounded to integers (nearest, ties to even).
#define UNITS(src, r) \
	VMULPD   src, src, src \
	VMULPD   Y12, src, src \
	VROUNDPD $0, src, r

// func compressBlockAVX2(x, e *float32, bits *byte, n int, invU float64, parity uint64) (k float64)
//
// compressBlockAVX2 is compressAVX2's signs with the squares counted in
// units u of the running sum's last place (sum_amd64.go explains why): k is the
// sum over the block of r, each square divided by u and rounded to an
// integer, a tie (an odd multiple of one half) rounded so that the unit
// count of the sum, of the given parity at the start, becomes even.
//
// The eight y of an iteration are rounded to nearest even and checked for
// ties together; an iteration with a tie (rare) finds the parity of the
// units summed before it and decides its ties with bit masks, without a
// branch per lane.
TEXT ·compressBlockAVX2(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	MOVQ         e+8(FP), DX
	MOVQ         bits+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSD invU+32(FP), Y12
	MOVQ         parity+40(FP), R9
	VBROADCASTSD half<>(SB), Y10
	VBROADCASTSD absmask<>(SB), Y11
	VBROADCASTSD magic<>(SB), Y9
	VMOVDQU      lanebitpd<>(SB), Y14
	VXORPD       Y8, Y8, Y8
	VXORPS       Y15, Y15, Y15
	VMOVDQU      reverse<>(SB), Y13
	SHRQ         $3, CX
	JZ           blockDone

blockLoop:
	VMOVUPS      (SI), Y0
	VADDPS       (DX), Y0, Y0
	VPERMPS      Y0, Y13, Y2
	VCMPPS       $1, Y15, Y2, Y2
	VMOVMSKPS    Y2, AX
	NOTL         AX
	MOVB         AX, (DI)
	VCVTPS2PD    X0, Y3
	VEXTRACTF128 $1, Y0, X4
	VCVTPS2PD    X4, Y4
	UNITS(Y3, Y5)
	UNITS(Y4, Y6)
	// a tie: |y - r| == 1/2 in some lane
	VSUBPD       Y5, Y3, Y1
	VSUBPD       Y6, Y4, Y2
	VANDPD       Y11, Y1, Y1
	VANDPD       Y11, Y2, Y2
	VMAXPD       Y2, Y1, Y1
	VCMPPD       $0, Y10, Y1, Y1
	VMOVMSKPD    Y1, AX
	TESTL        AX, AX
	JNZ          blockTies

blockAdd:
	VADDPD       Y6, Y5, Y5
	VADDPD       Y5, Y8, Y8
	ADDQ         $32, SI
	ADDQ         $32, DX
	INCQ         DI
	DECQ         CX
	JNZ          blockLoop

blockDone:
	// k: the four lanes of Y8 added (integers below 2^53 when the block
	// is usable: exact in any order)
	VEXTRACTF128 $1, Y8, X0
	VADDPD       X0, X8, X8
	VPERMILPD    $1, X8, X0
	VADDSD       X0, X8, X8
	VZEROUPPER
	MOVSD        X8, k+48(FP)
	RET

blockTies:
	// AX = T, the tie lanes: bit i for element i of the eight
	VSUBPD       Y5, Y3, Y1
	VANDPD       Y11, Y1, Y1
	VCMPPD       $0, Y10, Y1, Y1
	VMOVMSKPD    Y1, AX
	VCMPPD       $0, Y10, Y2, Y2
	VMOVMSKPD    Y2, BX
	SHLL         $4, BX
	ORL          BX, AX
	// BX = Q, the parities of the r rounded to even (r < 2^52 in a
	// usable block: bit 0 of r + 2^52 is r's, shifted to the sign)
	VADDPD       Y9, Y5, Y1
	VPSLLQ       $63, Y1, Y1
	VMOVMSKPD    Y1, BX
	VADDPD       Y9, Y6, Y2
	VPSLLQ       $63, Y2, Y2
	VMOVMSKPD    Y2, R10
	SHLL         $4, R10
	ORL          R10, BX
	// R8 = P, the parity of S' + Σr before the eight (the four lanes of
	// Y8 added: integers, exact in a usable block)
	VEXTRACTF128 $1, Y8, X1
	VADDPD       X1, X8, X1
	VPERMILPD    $1, X1, X2
	VADDSD       X2, X1, X1
	VCVTTSD2SIQ  X1, R8
	ADDQ         R9, R8
	ANDQ         $1, R8
	// R11 = F, the ties that take the odd neighbour: one pass per tie,
	// lowest first; P flips with every odd r since the last tie, a tie
	// takes the neighbour that makes S' + Σr even (the odd one when P is
	// 1), and leaves P = 0
	XORL         R11, R11

blockTie:
	MOVL         AX, R12
	DECL         R12
	XORL         AX, R12        // R12: bits 0..i, i the lowest tie
	MOVL         R12, R13
	SHRL         $1, R13
	XORL         R10, R10
	ANDL         BX, R13        // odd r after the last tie, before i
	SETPC        R10B           // their count is odd
	XORQ         R10, R8
	MOVL         AX, R13
	NEGL         R13
	ANDL         AX, R13        // bit i
	NEGQ         R8
	ANDL         R8, R13
	ORL          R13, R11
	XORQ         R8, R8
	NOTL         R12
	ANDL         R12, BX
	MOVL         AX, R12
	DECL         R12
	ANDL         R12, AX
	JNZ          blockTie

	// r = 2y - r (the odd neighbour) in the lanes of F
	VMOVD        R11, X1
	VPBROADCASTQ X1, Y1
	VPAND        Y14, Y1, Y1
	VPCMPEQQ     Y14, Y1, Y1
	VADDPD       Y3, Y3, Y2
	VSUBPD       Y5, Y2, Y2
	VBLENDVPD    Y1, Y2, Y5, Y5
	SHRL         $4, R11
	VMOVD        R11, X1
	VPBROADCASTQ X1, Y1
	VPAND        Y14, Y1, Y1
	VPCMPEQQ     Y14, Y1, Y1
	VADDPD       Y4, Y4, Y2
	VSUBPD       Y6, Y2, Y2
	VBLENDVPD    Y1, Y2, Y6, Y6
	JMP          blockAdd

// func compressBlockEvenAVX2(x, e *float32, bits *byte, n int, invU float64) (k float64)
//
// compressBlockEvenAVX2 is compressBlockAVX2 for a sum whose binade
// [2^p, 2^(p+1)) has p even, where no square of a float32 is a tie (sum_amd64.go
// explains why): it rounds and adds, and decides nothing.
TEXT ·compressBlockEvenAVX2(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         e+8(FP), DX
	MOVQ         bits+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSD invU+32(FP), Y12
	VXORPD       Y8, Y8, Y8
	VXORPS       Y15, Y15, Y15
	VMOVDQU      reverse<>(SB), Y13
	SHRQ         $3, CX
	JZ           evenDone

evenLoop:
	VMOVUPS      (SI), Y0
	VADDPS       (DX), Y0, Y0
	VPERMPS      Y0, Y13, Y2
	VCMPPS       $1, Y15, Y2, Y2
	VMOVMSKPS    Y2, AX
	NOTL         AX
	MOVB         AX, (DI)
	VCVTPS2PD    X0, Y3
	VEXTRACTF128 $1, Y0, X4
	VCVTPS2PD    X4, Y4
	UNITS(Y3, Y5)
	UNITS(Y4, Y6)
	VADDPD       Y6, Y5, Y5
	VADDPD       Y5, Y8, Y8
	ADDQ         $32, SI
	ADDQ         $32, DX
	INCQ         DI
	DECQ         CX
	JNZ          evenLoop

evenDone:
	VEXTRACTF128 $1, Y8, X0
	VADDPD       X0, X8, X8
	VPERMILPD    $1, X8, X0
	VADDSD       X0, X8, X8
	VZEROUPPER
	MOVSD        X8, k+40(FP)
	RET

// func updateErrorAVX2(x, e *float32, bits *byte, n int, pos, neg float32)
TEXT ·updateErrorAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         e+8(FP), DX
	MOVQ         bits+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSS pos+32(FP), Y10
	VBROADCASTSS neg+36(FP), Y11
	VMOVDQU      lanebit<>(SB), Y14
	SHRQ         $3, CX
	JZ           updateDone

updateLoop:
	SIGNED((DI), Y2)
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VSUBPS  Y2, Y0, Y0
	VMOVUPS Y0, (DX)
	ADDQ    $32, SI
	ADDQ    $32, DX
	INCQ    DI
	DECQ    CX
	JNZ     updateLoop

updateDone:
	VZEROUPPER
	RET

// func unpackAVX2(dst *float32, bits *byte, n int, pos, neg float32)
TEXT ·unpackAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DX
	MOVQ         bits+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS pos+24(FP), Y10
	VBROADCASTSS neg+28(FP), Y11
	VMOVDQU      lanebit<>(SB), Y14
	SHRQ         $3, CX
	JZ           unpackDone

unpackLoop:
	SIGNED((DI), Y2)
	VMOVUPS Y2, (DX)
	ADDQ    $32, DX
	INCQ    DI
	DECQ    CX
	JNZ     unpackLoop

unpackDone:
	VZEROUPPER
	RET

// func unpackAddAVX2(dst *float32, bits *byte, n int, pos, neg float32)
TEXT ·unpackAddAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DX
	MOVQ         bits+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS pos+24(FP), Y10
	VBROADCASTSS neg+28(FP), Y11
	VMOVDQU      lanebit<>(SB), Y14
	SHRQ         $3, CX
	JZ           unpackAddDone

unpackAddLoop:
	SIGNED((DI), Y2)
	VMOVUPS (DX), Y0
	VADDPS  Y2, Y0, Y0
	VMOVUPS Y0, (DX)
	ADDQ    $32, DX
	INCQ    DI
	DECQ    CX
	JNZ     unpackAddLoop

unpackAddDone:
	VZEROUPPER
	RET

// signs32<> orders, in each 128-bit lane, the 16 bytes of comparison
// results that VPACKSSDW, VPACKSSWB and VPERMQ $0xd8 leave (elements
// 0-3, 8-11, 4-7, 12-15 of the lane's 16) so that byte p holds element
// 8(p/8)+7-p%8: VPMOVMSKB then packs MSB first.
DATA signs32<>+0(SB)/8, $0x0001020308090a0b
DATA signs32<>+8(SB)/8, $0x040506070c0d0e0f
DATA signs32<>+16(SB)/8, $0x0001020308090a0b
DATA signs32<>+24(SB)/8, $0x040506070c0d0e0f
GLOBL signs32<>(SB), RODATA|NOPTR, $32

// func compressFastAVX2(x, e *float32, bits *byte, n int) float64
//
// compressFastAVX2 forms the signs of n elements (a multiple of 32) as
// compressAVX2 does and sums their squares in four partial sums of four
// lanes each, in no fixed order (scale.go), with FMA (the product is exact
// in float64, so a fused multiply-add rounds once, as an addition does).
TEXT ·compressFastAVX2(SB), NOSPLIT, $0-40
	MOVQ    x+0(FP), SI
	MOVQ    e+8(FP), DX
	MOVQ    bits+16(FP), DI
	MOVQ    n+24(FP), CX
	SHRQ    $5, CX
	VXORPD  Y8, Y8, Y8
	VXORPD  Y9, Y9, Y9
	VXORPD  Y10, Y10, Y10
	VXORPD  Y11, Y11, Y11
	VXORPS  Y15, Y15, Y15
	VMOVDQU signs32<>(SB), Y14
	TESTQ   CX, CX
	JZ      fastDone

fastLoop:
	VMOVUPS      (SI), Y0
	VADDPS       (DX), Y0, Y0
	VMOVUPS      32(SI), Y1
	VADDPS       32(DX), Y1, Y1
	VMOVUPS      64(SI), Y2
	VADDPS       64(DX), Y2, Y2
	VMOVUPS      96(SI), Y3
	VADDPS       96(DX), Y3, Y3
	// four bytes of signs: b < 0 in every lane, narrowed to bytes, put in
	// MSB-first order, collected and inverted
	VCMPPS       $1, Y15, Y0, Y4
	VCMPPS       $1, Y15, Y1, Y5
	VCMPPS       $1, Y15, Y2, Y6
	VCMPPS       $1, Y15, Y3, Y7
	VPACKSSDW    Y5, Y4, Y4
	VPACKSSDW    Y7, Y6, Y6
	VPACKSSWB    Y6, Y4, Y4
	VPERMQ       $0xd8, Y4, Y4
	VPSHUFB      Y14, Y4, Y4
	VPMOVMSKB    Y4, AX
	NOTL         AX
	MOVL         AX, (DI)
	// squares in float64, one partial sum per lane
	VCVTPS2PD    X0, Y4
	VEXTRACTF128 $1, Y0, X5
	VCVTPS2PD    X5, Y5
	VCVTPS2PD    X1, Y6
	VEXTRACTF128 $1, Y1, X7
	VCVTPS2PD    X7, Y7
	VFMADD231PD  Y4, Y4, Y8
	VFMADD231PD  Y5, Y5, Y9
	VFMADD231PD  Y6, Y6, Y10
	VFMADD231PD  Y7, Y7, Y11
	VCVTPS2PD    X2, Y4
	VEXTRACTF128 $1, Y2, X5
	VCVTPS2PD    X5, Y5
	VCVTPS2PD    X3, Y6
	VEXTRACTF128 $1, Y3, X7
	VCVTPS2PD    X7, Y7
	VFMADD231PD  Y4, Y4, Y8
	VFMADD231PD  Y5, Y5, Y9
	VFMADD231PD  Y6, Y6, Y10
	VFMADD231PD  Y7, Y7, Y11
	ADDQ         $128, SI
	ADDQ         $128, DX
	ADDQ         $4, DI
	DECQ         CX
	JNZ          fastLoop

fastDone:
	VADDPD       Y9, Y8, Y8
	VADDPD       Y11, Y10, Y10
	VADDPD       Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPD       X9, X8, X8
	VPERMILPD    $1, X8, X9
	VADDSD       X9, X8, X8
	VZEROUPPER
	MOVSD        X8, ret+32(FP)
	RET
