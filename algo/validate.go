package algo

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by the plan functions, wrapped with details; match them
// with errors.Is.
var (
	// ErrInvalid: an argument is out of range (size < 1, rank or root not in
	// [0, size), a negative count or chunk, a counts slice whose length is
	// not size, an all-to-all whose own send and receive counts differ).
	ErrInvalid = errors.New("algo: invalid argument")
	// ErrUnsupported: the algorithm does not exist for the operation, or is
	// Auto, which the caller must resolve to a concrete algorithm first.
	ErrUnsupported = errors.New("algo: algorithm not available for this operation")
)

// AlgorithmsFor returns the algorithms the plan function of op accepts, or
// nil for an unknown op. op is one of "allreduce", "reduce", "broadcast",
// "allgather", "reducescatter", "gather", "scatter", "alltoall" and
// "barrier". The result is a new slice on every call; Auto is never in it.
func AlgorithmsFor(op string) []Algorithm {
	switch op {
	case "allreduce":
		return []Algorithm{Ring, RecursiveDoubling, HalvingDoubling, Tree, Linear}
	case "reduce":
		return []Algorithm{Tree, Linear}
	case "broadcast":
		return []Algorithm{Tree, Ring, Linear}
	case "allgather":
		return []Algorithm{Ring, RecursiveDoubling, Tree}
	case "reducescatter":
		return []Algorithm{Ring, HalvingDoubling, Tree}
	case "gather", "scatter":
		return []Algorithm{Tree, Linear}
	case "alltoall":
		return []Algorithm{Pairwise, Linear}
	case "barrier":
		return []Algorithm{RecursiveDoubling, Tree}
	}
	return nil
}

func algorithmList(as []Algorithm) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.String()
	}
	return strings.Join(names, ", ")
}

// checkAlgorithm reports whether op has a schedule for a.
func checkAlgorithm(op string, a Algorithm) error {
	as := AlgorithmsFor(op)
	if a == Auto {
		return fmt.Errorf("%w: %s: algorithm auto must be resolved by the caller first (want one of %s)",
			ErrUnsupported, op, algorithmList(as))
	}
	for _, x := range as {
		if x == a {
			return nil
		}
	}
	return fmt.Errorf("%w: %s has no %v schedule (want one of %s)", ErrUnsupported, op, a, algorithmList(as))
}

// checkGroup validates the algorithm, size and rank common to every plan.
func checkGroup(op string, a Algorithm, rank, size int) error {
	if err := checkAlgorithm(op, a); err != nil {
		return err
	}
	if size < 1 {
		return fmt.Errorf("%w: %s: size %d, want at least 1", ErrInvalid, op, size)
	}
	if rank < 0 || rank >= size {
		return fmt.Errorf("%w: %s: rank %d out of range [0, %d)", ErrInvalid, op, rank, size)
	}
	return nil
}

func checkRoot(op string, root, size int) error {
	if root < 0 || root >= size {
		return fmt.Errorf("%w: %s: root %d out of range [0, %d)", ErrInvalid, op, root, size)
	}
	return nil
}

func checkCount(op string, count int) error {
	if count < 0 {
		return fmt.Errorf("%w: %s: negative count %d", ErrInvalid, op, count)
	}
	return nil
}

func checkChunk(op string, chunk int) error {
	if chunk < 0 {
		return fmt.Errorf("%w: %s: negative chunk %d (0 means no chunking)", ErrInvalid, op, chunk)
	}
	return nil
}

// checkCounts validates a per-rank counts slice; name says which argument
// it is in the message.
func checkCounts(op, name string, counts []int, size int) error {
	if len(counts) != size {
		return fmt.Errorf("%w: %s: len(%s) = %d, want size %d (one count per rank)", ErrInvalid, op, name, len(counts), size)
	}
	for i, c := range counts {
		if c < 0 {
			return fmt.Errorf("%w: %s: %s[%d] = %d is negative", ErrInvalid, op, name, i, c)
		}
	}
	return nil
}
