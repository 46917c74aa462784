package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// percentile returns the p-th percentile (0..100) of ds by the
// nearest-rank method, or 0 for none. ds is not modified.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(p/100*float64(len(s))+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

var rankWord = regexp.MustCompile(`\branks? (\d+)\b`)

// ranksNamed returns the ranks an error text names ("rank 3", "ranks 2").
func ranksNamed(text string) []int {
	var out []int
	for _, m := range rankWord.FindAllStringSubmatch(text, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// namesAny reports whether text names one of ranks.
func namesAny(text string, ranks ...int) bool {
	for _, r := range ranksNamed(text) {
		if slices.Contains(ranks, r) {
			return true
		}
	}
	return false
}

// ms formats d in milliseconds, or "-" for a missing figure.
func ms(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}
