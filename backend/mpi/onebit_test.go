//go:build mpi && cgo

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend/mpi"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/onebit"
)

// The 1-bit compressed all-reduce (package onebit) over the MPI backend:
// the ranks run onebit.AllReduce on MPI and, for the same inputs, on a
// native world of as many ranks inside each process, and want the same
// bits (results and error state) after every step.
//
// onebitEnv names the role of these ranks. init runs them, before
// TestMain, so that this file needs no case in mpirun_test.go's switch of
// roles.
const onebitEnv = "GOCOMM_MPI_ONEBIT_CHILD"

func init() {
	if os.Getenv(onebitEnv) != "" {
		os.Exit(testkit.Status("onebit rank "+os.Getenv("OMPI_COMM_WORLD_RANK"), childOnebit()))
	}
}

// TestOnebit runs onebit.AllReduce on 1 to 4 MPI ranks, on the world and
// on the groups of a Split, at lengths that do and do not divide, and
// checks every step bit for bit against the native backend (whose own
// tests check it against a transcription of DeepSpeed's algorithm), and
// that bad input on one rank fails every rank.
func TestOnebit(t *testing.T) {
	for np := 1; np <= 4; np++ {
		out, err := runMPI(t, np, 4*time.Minute, []string{onebitEnv + "=1"}, os.Args[0], "-test.run=^$")
		if err != nil {
			t.Fatalf("np=%d: %v\n%s", np, err, tail(out, 30))
		}
		if !strings.Contains(out, "onebit: ok") {
			t.Fatalf("np=%d: the ranks did not report their checks:\n%s", np, tail(out, 30))
		}
	}
}

func childOnebit() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := initMPI(ctx, mpi.Name, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	steps := 0
	n, err := onebitAgainstNative(ctx, c)
	if err != nil {
		return fmt.Errorf("world: %w", err)
	}
	steps += n
	if c.Size() >= 2 {
		// two colours, keys reversing the order within each
		g, err := c.Split(ctx, c.Rank()%2, -c.Rank())
		if err != nil {
			return err
		}
		n, err := onebitAgainstNative(ctx, g)
		if err != nil {
			return fmt.Errorf("split group (rank %d of %d): %w", g.Rank(), g.Size(), err)
		}
		steps += n
		if err := onebitBadInput(ctx, c); err != nil {
			return err
		}
	}
	fmt.Printf("onebit: ok (rank %d of %d, %d steps checked)\n", c.Rank(), c.Size(), steps)
	return nil
}

// onebitInputs returns the input of every rank of a world of n for one
// step: the same on every process, from the seed.
func onebitInputs(n, l int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	xs := make([][]float32, n)
	for r := range xs {
		xs[r] = make([]float32, l)
		for i := range xs[r] {
			switch rng.IntN(20) {
			case 0:
				xs[r][i] = float32(math.Copysign(0, -1))
			case 1:
				xs[r][i] = 0
			default:
				xs[r][i] = float32(rng.NormFloat64() * 0.01)
			}
		}
	}
	return xs
}

// onebitAgainstNative runs several tensors over several steps on c (MPI)
// and on a native world of c.Size() ranks in this process, and returns
// how many steps it compared, or the first difference.
func onebitAgainstNative(ctx context.Context, c *comm.Comm) (int, error) {
	n, me := c.Size(), c.Rank()
	native, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	defer testkit.CloseAll(native)
	steps := 0
	// lengths that divide the padding unit and that do not; W padded to a
	// multiple of 8N (as DeepSpeed's tests pad) as well as PaddedLen's
	pad8N := func(l int) int { return 8 * n * ((l + 8*n - 1) / (8 * n)) }
	for _, tc := range []struct{ l, w int }{
		{1, 0}, {13, pad8N(13)}, {8 * n, 0}, {1000, 0}, {4099, 0}, {4099, pad8N(4099)},
	} {
		newState := func() *onebit.State {
			if tc.w == 0 {
				return onebit.NewState(tc.l, n)
			}
			return &onebit.State{WorkerError: make([]float32, tc.w), ServerError: make([]float32, tc.w/n)}
		}
		mine := newState()
		states := make([]*onebit.State, n)
		for r := range states {
			states[r] = newState()
		}
		for step := range 8 {
			xs := onebitInputs(n, tc.l, uint64(1000*tc.l+10*tc.w+step))
			got := append([]float32(nil), xs[me]...)
			if err := onebit.AllReduce(ctx, c, got, mine); err != nil {
				return steps, fmt.Errorf("l=%d step %d: MPI: %w", tc.l, step, err)
			}
			bufs := make([][]float32, n)
			for r := range bufs {
				bufs[r] = append([]float32(nil), xs[r]...)
			}
			errs := testkit.OnEveryRank(native, func(r int, nc *comm.Comm) error {
				return onebit.AllReduce(ctx, nc, bufs[r], states[r])
			})
			if err := errors.Join(errs...); err != nil {
				return steps, fmt.Errorf("l=%d step %d: native: %w", tc.l, step, err)
			}
			for _, cmp := range []struct {
				what      string
				got, want []float32
			}{
				{"result", got, bufs[me]},
				{"worker error", mine.WorkerError, states[me].WorkerError},
				{"server error", mine.ServerError, states[me].ServerError},
				{"native rank 0's result", bufs[0], bufs[me]},
			} {
				if i := firstDiff(cmp.got, cmp.want); i >= 0 {
					return steps, fmt.Errorf("l=%d W=%d step %d: %s differs from the native backend's at %d of %d: %v (%#x) vs %v (%#x)",
						tc.l, len(mine.WorkerError), step, cmp.what, i, len(cmp.want), cmp.got[i], math.Float32bits(cmp.got[i]), cmp.want[i], math.Float32bits(cmp.want[i]))
				}
			}
			steps++
		}
	}
	return steps, nil
}

// firstDiff is the first index where a and b differ in bits, or -1 (the
// length, or a's, when only the lengths differ).
func firstDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// onebitBadInput gives rank 1 a state whose W is not a multiple of 8N:
// every rank must fail with comm.ErrInvalid (within the deadline: no
// hang), and the others' buffers must be left alone.
func onebitBadInput(ctx context.Context, c *comm.Comm) error {
	const l = 50
	n := c.Size()
	st := onebit.NewState(l, n)
	if c.Rank() == 1 {
		w := 8*n*((l+8*n-1)/(8*n)) + 8 // a multiple of 8, not of 8N for N > 1
		st = &onebit.State{WorkerError: make([]float32, w), ServerError: make([]float32, w/n)}
	}
	buf := make([]float32, l)
	for i := range buf {
		buf[i] = float32(i)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := onebit.AllReduce(cctx, c, buf, st)
	if !errors.Is(err, comm.ErrInvalid) {
		return fmt.Errorf("bad state on rank 1: rank %d got %v, want comm.ErrInvalid", c.Rank(), err)
	}
	if c.Rank() != 1 {
		for i, v := range buf {
			if v != float32(i) {
				return fmt.Errorf("bad state on rank 1: rank %d's buffer changed at %d", c.Rank(), i)
			}
		}
	}
	return nil
}
