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

DATA half<>+0(SB)/8, $0.5
GLOBL half<>(SB), RODATA|NOPTR, $8

DATA absmask<>+0(SB)/8, $0x7fffffffffffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $8

// ULPS(src) squares the four float64 lanes of src, scales them by 1/u
// (Y12, a power of two: exact), rounds them to integers (nearest, ties to
// even), adds the integers to Y8 and sets the lanes of Y9 whose fraction
// was exactly one half (a tie). Y10 holds 0.5 and Y11 the abs mask.
#define ULPS(src) \
	VMULPD   src, src, src \
	VMULPD   Y12, src, src \
	VROUNDPD $0, src, Y5 \
	VADDPD   Y5, Y8, Y8 \
	VSUBPD   Y5, src, src \
	VANDPD   Y11, src, src \
	VCMPPD   $0, Y10, src, src \
	VORPD    src, Y9, Y9

// func compressBlockAVX2(x, e *float32, bits *byte, n int, invU float64) (k float64, ties int)
//
// compressBlockAVX2 is compressAVX2's signs with the squares counted in
// units u of the running sum's last place: k is the sum over the block of
// each square divided by u and rounded to an integer, ties is nonzero when
// some square was exactly half a unit from two integers. See compress in
// dispatch_amd64.go for why that gives the index-order sum.
TEXT ·compressBlockAVX2(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	MOVQ         e+8(FP), DX
	MOVQ         bits+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSD invU+32(FP), Y12
	VBROADCASTSD half<>(SB), Y10
	VBROADCASTSD absmask<>(SB), Y11
	VXORPD       Y8, Y8, Y8
	VXORPD       Y9, Y9, Y9
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
	ULPS(Y3)
	ULPS(Y4)
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
	VMOVMSKPD    Y9, AX
	VZEROUPPER
	MOVSD        X8, k+40(FP)
	MOVQ         AX, ties+48(FP)
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
