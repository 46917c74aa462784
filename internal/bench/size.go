package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxSweep bounds the number of sizes a sweep may produce, so that a typo
// (-f 1 with no step) is an error rather than a run that never ends.
const maxSweep = 4096

// ParseSize parses a byte count: a non-negative integer with an optional
// binary suffix K, M, G or T (also KB/KiB, ...; case-insensitive, powers of
// 1024 as in nccl-tests) and an optional B.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "IB")
	t = strings.TrimSuffix(t, "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a byte count such as 8, 4K or 64M", s)
	}
	if v > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v * mult, nil
}

// FormatSize is the inverse of ParseSize: the shortest spelling with a K,
// M, G or T suffix when size is a whole multiple of one.
func FormatSize(size int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if size != 0 && size%u.m == 0 {
			return strconv.FormatInt(size/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(size, 10)
}

// HumanSize spells size for people: "8 B", "4 KiB", "1.5 MiB".
func HumanSize(size int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(size)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.3g %s", v, units[i])
}

// Sweep lists the sizes from min to max inclusive, as nccl-tests steps
// them: multiplied by factor when factor > 1, else increased by step.
func Sweep(min, max int64, factor float64, step int64) ([]int64, error) {
	switch {
	case min < 0 || max < 0:
		return nil, fmt.Errorf("sizes must not be negative (-b %d, -e %d)", min, max)
	case max < min:
		return nil, fmt.Errorf("max size (-e %s) is below min size (-b %s)", FormatSize(max), FormatSize(min))
	case min == max:
		return []int64{min}, nil
	case factor <= 1 && step <= 0:
		return nil, fmt.Errorf("to go from %s to %s, give a factor > 1 (-f) or a step > 0 (--step)", FormatSize(min), FormatSize(max))
	case factor > 1 && min == 0:
		return nil, fmt.Errorf("a sweep by factor cannot start at size 0 (-b)")
	}
	var sizes []int64
	for s := min; s <= max; {
		if len(sizes) == maxSweep {
			return nil, fmt.Errorf("the sweep from %s to %s has more than %d sizes: raise -f or --step", FormatSize(min), FormatSize(max), maxSweep)
		}
		sizes = append(sizes, s)
		var next int64
		if factor > 1 {
			f := float64(s) * factor
			if f > float64(math.MaxInt64) {
				break
			}
			next = int64(f)
			if next <= s {
				next = s + 1
			}
		} else {
			if s > math.MaxInt64-step {
				break
			}
			next = s + step
		}
		s = next
	}
	return sizes, nil
}
