//go:build linux && !gocomm_portable

#include "textflag.h"

// F16BINARY(op) sets d[i] = d[i] op s[i] for n elements (n a multiple of
// 16), sixteen at a time: widen, compute in float32, narrow to nearest
// even. Arguments: d+0(FP), s+8(FP), n+16(FP).
#define F16BINARY(op) \
	MOVQ d+0(FP), DI \
	MOVQ s+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $4, CX \
	JZ   done \
loop: \
	VCVTPH2PS (DI), Y0 \
	VCVTPH2PS 16(DI), Y1 \
	VCVTPH2PS (SI), Y2 \
	VCVTPH2PS 16(SI), Y3 \
	op        Y2, Y0, Y0 \
	op        Y3, Y1, Y1 \
	VCVTPS2PH $0, Y0, (DI) \
	VCVTPS2PH $0, Y1, 16(DI) \
	ADDQ      $32, DI \
	ADDQ      $32, SI \
	DECQ      CX \
	JNZ       loop \
	VZEROUPPER \
done: \
	RET


// func cpuHasF16C() bool
TEXT ·cpuHasF16C(SB), NOSPLIT, $0-1
	MOVL $1, AX
	XORL CX, CX
	CPUID
	// ECX bit 27 OSXSAVE, bit 28 AVX, bit 29 F16C.
	MOVL CX, BX
	ANDL $0x38000000, BX
	CMPL BX, $0x38000000
	JNE  no
	// The OS must save XMM and YMM state (XCR0 bits 1 and 2).
	XORL CX, CX
	XGETBV
	ANDL $6, AX
	CMPL AX, $6
	JNE  no
	MOVB $1, ret+0(FP)
	RET
no:
	MOVB $0, ret+0(FP)
	RET

// func f16AddAVX(d, s *uint16, n int)
TEXT ·f16AddAVX(SB), NOSPLIT, $0-24
	F16BINARY(VADDPS)

// func f16MulAVX(d, s *uint16, n int)
TEXT ·f16MulAVX(SB), NOSPLIT, $0-24
	F16BINARY(VMULPS)

// func f16DivAVX(b *uint16, x float32, n int)
TEXT ·f16DivAVX(SB), NOSPLIT, $0-24
	MOVQ         b+0(FP), DI
	VBROADCASTSS x+8(FP), Y4
	MOVQ         n+16(FP), CX
	SHRQ         $4, CX
	JZ           divDone
divLoop:
	VCVTPH2PS (DI), Y0
	VCVTPH2PS 16(DI), Y1
	VDIVPS    Y4, Y0, Y0
	VDIVPS    Y4, Y1, Y1
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	ADDQ      $32, DI
	DECQ      CX
	JNZ       divLoop
divDone:
	VZEROUPPER
	RET

// func cpuHasAVX2() bool
TEXT ·cpuHasAVX2(SB), NOSPLIT, $0-1
	MOVL $7, AX
	XORL CX, CX
	CPUID
	// EBX bit 5: AVX2.
	SHRL $5, BX
	ANDL $1, BX
	MOVB BX, ret+0(FP)
	RET

// Narrowing of the eight float32 (as bits) in Y0 to bfloat16 in the low
// halves of Y0's lanes: b + 0x7fff + (b>>16 & 1), shifted down, or for a
// NaN (b & 0x7fffffff > 0x7f800000) b>>16 | 0x40. Uses Y1 to Y3; constants
// Y8 = 1, Y9 = 0x7fff, Y10 = 0x7fffffff, Y11 = 0x7f800000, Y12 = 0x40.
#define BF16NARROW \
	VPSRLD   $16, Y0, Y1 \
	VPAND    Y8, Y1, Y2 \
	VPADDD   Y9, Y0, Y3 \
	VPADDD   Y2, Y3, Y3 \
	VPSRLD   $16, Y3, Y3 \
	VPOR     Y12, Y1, Y1 \
	VPAND    Y10, Y0, Y2 \
	VPCMPGTD Y11, Y2, Y2 \
	VPXOR    Y3, Y1, Y1 \
	VPAND    Y2, Y1, Y1 \
	VPXOR    Y1, Y3, Y0

#define BF16CONSTS \
	MOVL         $1, AX \
	VMOVD        AX, X8 \
	VPBROADCASTD X8, Y8 \
	MOVL         $0x7fff, AX \
	VMOVD        AX, X9 \
	VPBROADCASTD X9, Y9 \
	MOVL         $0x7fffffff, AX \
	VMOVD        AX, X10 \
	VPBROADCASTD X10, Y10 \
	MOVL         $0x7f800000, AX \
	VMOVD        AX, X11 \
	VPBROADCASTD X11, Y11 \
	MOVL         $0x40, AX \
	VMOVD        AX, X12 \
	VPBROADCASTD X12, Y12

// func bf16AddAVX2(d, s *uint16, n int)
TEXT ·bf16AddAVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   bfAddDone
	BF16CONSTS
bfAddLoop:
	VPMOVZXWD (DI), Y0
	VPMOVZXWD (SI), Y4
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y4, Y4
	VADDPS    Y4, Y0, Y0
	BF16NARROW
	VMOVDQU   Y0, Y5
	VPMOVZXWD 16(DI), Y0
	VPMOVZXWD 16(SI), Y4
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y4, Y4
	VADDPS    Y4, Y0, Y0
	BF16NARROW
	VPACKUSDW Y0, Y5, Y5
	VPERMQ    $0xd8, Y5, Y5
	VMOVDQU   Y5, (DI)
	ADDQ      $32, DI
	ADDQ      $32, SI
	DECQ      CX
	JNZ       bfAddLoop
	VZEROUPPER
bfAddDone:
	RET
