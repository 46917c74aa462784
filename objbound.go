package comm

import "fmt"

// maxObjectBytes bounds the size of an object's encoding as a rank
// announces it, checked before anything is allocated for it: gob cannot
// decode a message this large anyway (its own limit, 8 GiB on 64-bit
// platforms).
const maxObjectBytes = int64(1<<30) << (^uint(0) >> 62)

// checkSizes refuses announced encoding sizes that no rank could have
// produced (negative, over maxObjectBytes, or summing past an int), so a
// corrupted size fails every rank that read it with ErrLength, where a
// make of it would panic or exhaust memory. from(i) is the rank that
// announced sizes[i].
func checkSizes(op string, sizes []int64, from func(i int) int) error {
	var total int64
	for i, n := range sizes {
		if n < 0 || n > maxObjectBytes {
			return fmt.Errorf("%w: %s: rank %d announced an encoding of %d bytes (0 to %d possible)", ErrLength, op, from(i), n, maxObjectBytes)
		}
		if total += n; total > int64(maxInt) || total < 0 {
			return fmt.Errorf("%w: %s: the encodings announced add up to more than %d bytes", ErrLength, op, maxInt)
		}
	}
	return nil
}

const maxInt = int(^uint(0) >> 1)
