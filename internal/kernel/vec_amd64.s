//go:build linux && !gocomm_portable

#include "textflag.h"

// BINARY128(op) sets d[i] = d[i] op s[i] over n bytes (n a multiple of
// 128), four YMM registers at a time; d's value is op's first source.
// Arguments: d+0(FP), s+8(FP), n+16(FP).
#define BINARY128(op) \
	MOVQ d+0(FP), DI \
	MOVQ s+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $7, CX \
	JZ   done \
loop: \
	VMOVDQU (DI), Y0 \
	VMOVDQU 32(DI), Y1 \
	VMOVDQU 64(DI), Y2 \
	VMOVDQU 96(DI), Y3 \
	op      (SI), Y0, Y0 \
	op      32(SI), Y1, Y1 \
	op      64(SI), Y2, Y2 \
	op      96(SI), Y3, Y3 \
	VMOVDQU Y0, (DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ    $128, DI \
	ADDQ    $128, SI \
	DECQ    CX \
	JNZ     loop \
	VZEROUPPER \
done: \
	RET

// TERNARY128NT(op) sets d[i] = d2[i] = a[i] op b[i] over n bytes (n a
// multiple of 128; d and d2 32-byte aligned) with stores that bypass the
// cache, then orders them before any later store (SFENCE); a's value is
// op's first source. a may be d. Arguments: d+0(FP), d2+8(FP), a+16(FP),
// b+24(FP), n+32(FP).
#define TERNARY128NT(op) \
	MOVQ d+0(FP), DI \
	MOVQ d2+8(FP), DX \
	MOVQ a+16(FP), SI \
	MOVQ b+24(FP), BX \
	MOVQ n+32(FP), CX \
	SHRQ $7, CX \
	JZ   done \
loop: \
	VMOVDQU  (SI), Y0 \
	VMOVDQU  32(SI), Y1 \
	VMOVDQU  64(SI), Y2 \
	VMOVDQU  96(SI), Y3 \
	op       (BX), Y0, Y0 \
	op       32(BX), Y1, Y1 \
	op       64(BX), Y2, Y2 \
	op       96(BX), Y3, Y3 \
	VMOVNTDQ Y0, (DI) \
	VMOVNTDQ Y1, 32(DI) \
	VMOVNTDQ Y2, 64(DI) \
	VMOVNTDQ Y3, 96(DI) \
	VMOVNTDQ Y0, (DX) \
	VMOVNTDQ Y1, 32(DX) \
	VMOVNTDQ Y2, 64(DX) \
	VMOVNTDQ Y3, 96(DX) \
	ADDQ     $128, DI \
	ADDQ     $128, DX \
	ADDQ     $128, SI \
	ADDQ     $128, BX \
	DECQ     CX \
	JNZ      loop \
	SFENCE \
	VZEROUPPER \
done: \
	RET

// func addF32AVX2(d, s *byte, n int)
TEXT ·addF32AVX2(SB), NOSPLIT, $0-24
	BINARY128(VADDPS)

// func addF64AVX2(d, s *byte, n int)
TEXT ·addF64AVX2(SB), NOSPLIT, $0-24
	BINARY128(VADDPD)

// func mulF32AVX2(d, s *byte, n int)
TEXT ·mulF32AVX2(SB), NOSPLIT, $0-24
	BINARY128(VMULPS)

// func mulF64AVX2(d, s *byte, n int)
TEXT ·mulF64AVX2(SB), NOSPLIT, $0-24
	BINARY128(VMULPD)

// func addI32AVX2(d, s *byte, n int)
TEXT ·addI32AVX2(SB), NOSPLIT, $0-24
	BINARY128(VPADDD)

// func addI64AVX2(d, s *byte, n int)
TEXT ·addI64AVX2(SB), NOSPLIT, $0-24
	BINARY128(VPADDQ)

// func mulI32AVX2(d, s *byte, n int)
TEXT ·mulI32AVX2(SB), NOSPLIT, $0-24
	BINARY128(VPMULLD)

// func copyNTAVX2(d, s *byte, n int)
// Copies n bytes (a multiple of 128; d 32-byte aligned) with stores that
// bypass the cache, then orders them before any later store (SFENCE).
TEXT ·copyNTAVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $7, CX
	JZ   ntdone
ntloop:
	VMOVDQU  (SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVDQU  64(SI), Y2
	VMOVDQU  96(SI), Y3
	VMOVNTDQ Y0, (DI)
	VMOVNTDQ Y1, 32(DI)
	VMOVNTDQ Y2, 64(DI)
	VMOVNTDQ Y3, 96(DI)
	ADDQ     $128, DI
	ADDQ     $128, SI
	DECQ     CX
	JNZ      ntloop
	SFENCE
	VZEROUPPER
ntdone:
	RET

// func addF32ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·addF32ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VADDPS)

// func addF64ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·addF64ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VADDPD)

// func mulF32ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·mulF32ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VMULPS)

// func mulF64ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·mulF64ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VMULPD)

// func addI32ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·addI32ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VPADDD)

// func addI64ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·addI64ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VPADDQ)

// func mulI32ToNTAVX2(d, d2, a, b *byte, n int)
TEXT ·mulI32ToNTAVX2(SB), NOSPLIT, $0-40
	TERNARY128NT(VPMULLD)
