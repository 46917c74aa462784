//go:build !gocomm_portable

#include "textflag.h"

// func Store64(p *uint64, v uint64)
// A plain store: x86-64 keeps stores in program order and never lets a
// store pass an earlier load, which is release order. The call keeps the
// compiler from moving the caller's memory accesses across it.
TEXT ·Store64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
