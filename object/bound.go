package object

import (
	"fmt"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/gobwire"
)

// checkSizes refuses announced encoding sizes that no rank could have
// produced (negative, over gobwire.MaxBytes, or summing past an int), so a
// corrupted size fails every rank that read it with comm.ErrLength, where
// a make of it would panic or exhaust memory. from(i) is the rank that
// announced sizes[i].
func checkSizes(op string, sizes []int64, from func(i int) int) error {
	var total int64
	for i, n := range sizes {
		if n < 0 || n > gobwire.MaxBytes {
			return fmt.Errorf("%w: %s: rank %d announced an encoding of %d bytes (0 to %d possible)", comm.ErrLength, op, from(i), n, gobwire.MaxBytes)
		}
		if total += n; total > int64(maxInt) || total < 0 {
			return fmt.Errorf("%w: %s: the encodings announced add up to more than %d bytes", comm.ErrLength, op, maxInt)
		}
	}
	return nil
}

const maxInt = int(^uint(0) >> 1)
