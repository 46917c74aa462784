package cpubind

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrBind reports a GOCOMM_BIND value that cannot be applied; the message
// says why and what to set instead.
var ErrBind = errors.New("GOCOMM_BIND")

// Resolve returns the CPUs local rank localRank of localSize is to run on
// for the GOCOMM_BIND value v, given the CPUs the process may run on now
// (allowed, in any order; nil where unknown). A nil result with a nil
// error means: leave the process as it is.
func Resolve(v string, localRank, localSize int, allowed []int) ([]int, error) {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "", "none", "off", "0":
		return nil, nil
	case "auto":
		return Block(allowed, localRank, localSize), nil
	}
	cpus, err := ParseList(v)
	if err != nil {
		return nil, fmt.Errorf("%w=%q: %v (want none, auto, or a CPU list such as 0-3,8)", ErrBind, v, err)
	}
	return cpus, nil
}

// SharedProcs returns, for GOCOMM_BIND value v, the GOMAXPROCS a rank is
// to run with when the host's local ranks outnumber its CPUs (allowed) and
// auto cannot give each a CPU of its own: its share, allowed/localSize,
// and at least 1. Zero means no change (not auto, or every rank has CPUs
// of its own). As torchrun sets OMP_NUM_THREADS=1 for several ranks per
// host, this keeps a rank's runtime from running more threads than its
// share, which makes small collectives of oversubscribed ranks faster
// (docs/performance.md).
func SharedProcs(v string, localSize int, allowed []int) int {
	if !strings.EqualFold(strings.TrimSpace(v), "auto") || len(allowed) == 0 || localSize <= len(allowed) {
		return 0
	}
	return max(1, len(allowed)/localSize)
}

// Block returns block localRank of localSize equal contiguous blocks of
// allowed (sorted first; CPU i of k goes to block i*localSize/k). When
// the ranks outnumber the CPUs by a whole factor, each CPU takes
// localSize/k ranks, dealt as mpirun maps ranks by core (rank r on CPU r
// mod k), so that a CPU's ranks take turns on it and no CPU holds more of
// them than another: left to the kernel, 4 ranks on 2 CPUs spent whole
// runs with three on one CPU, where a rank alone on the other yields to
// nobody, which slows every small collective. It returns nil when there is nothing to split: ranks that
// do not divide among the CPUs evenly, or a local rank outside [0,
// localSize).
func Block(allowed []int, localRank, localSize int) []int {
	k := len(allowed)
	if localSize < 1 || localRank < 0 || localRank >= localSize || k == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(allowed))
	if k < localSize {
		if localSize%k != 0 {
			return nil
		}
		c := localRank % k
		return sorted[c : c+1 : c+1]
	}
	lo, hi := localRank*k/localSize, (localRank+1)*k/localSize
	return sorted[lo:hi:hi]
}

// ParseList parses a CPU list as taskset -c and cpuset files write it:
// comma-separated CPU numbers and inclusive ranges, such as 0-3,8,10-11.
// It returns the CPUs sorted, without duplicates.
func ParseList(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %q runs backwards", part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// maxCPU bounds CPU numbers (Linux's CPU sets hold 1024).
const maxCPU = 1023

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > maxCPU {
		return 0, fmt.Errorf("%q is not a CPU number in [0, %d]", s, maxCPU)
	}
	return n, nil
}

// Format writes cpus as a list ParseList reads back (ranges joined).
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
