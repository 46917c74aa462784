package onebit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/onebit"
)

func TestPaddedLen(t *testing.T) {
	cases := []struct{ numel, n, want int }{
		{1, 2, 16}, {16, 2, 16}, {17, 2, 32},
		{1, 3, 72}, {72, 3, 72}, {73, 3, 144},
		{1, 4, 32}, {1, 8, 64}, {1, 16, 256}, {100, 5, 200},
		{0, 4, 0}, {5, 1, 8}, {-1, 2, 0}, {5, 0, 0},
	}
	for _, c := range cases {
		if got := onebit.PaddedLen(c.numel, c.n); got != c.want {
			t.Errorf("PaddedLen(%d, %d) = %d, want %d", c.numel, c.n, got, c.want)
		}
	}
	st := onebit.NewState(100, 3)
	if len(st.WorkerError) != 144 || len(st.ServerError) != 48 {
		t.Errorf("NewState(100, 3): %d and %d errors, want 144 and 48", len(st.WorkerError), len(st.ServerError))
	}
}

// TestAllReduceOnGroups runs the reference check on the groups of a
// Split world of 5 (colours 0 and 1: groups of 3 and 2), and with a W
// that is a multiple of 8*N but not PaddedLen.
func TestAllReduceOnGroups(t *testing.T) {
	world := localWorld(t, 5)
	groups := make([]*comm.Comm, 5)
	errs := onEveryRank(world, func(c *comm.Comm, r int) error {
		g, err := c.Split(context.Background(), r%2, r)
		groups[r] = g
		return err
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	even := []*comm.Comm{groups[0], groups[2], groups[4]}
	odd := []*comm.Comm{groups[1], groups[3]}
	checkAgainstReference(t, even, 301, 10)
	checkAgainstReference(t, odd, 77, 10)

	// W = 8*N = 16 for 13 values on the odd group, as DeepSpeed's tests pad.
	rng := rand.New(rand.NewPCG(7, 8))
	states := []*onebit.State{
		{WorkerError: make([]float32, 16), ServerError: make([]float32, 8)},
		{WorkerError: make([]float32, 16), ServerError: make([]float32, 8)},
	}
	ref := newRefWorld(2, 16)
	for range 20 {
		xs := randomInputs(rng, 2, 13)
		bufs := [][]float32{append([]float32(nil), xs[0]...), append([]float32(nil), xs[1]...)}
		errs := onEveryRank(odd, func(c *comm.Comm, r int) error {
			return onebit.AllReduce(context.Background(), c, bufs[r], states[r])
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		want := ref.step(xs)
		for r := range 2 {
			if i, same := sameBits(bufs[r], want); !same {
				t.Fatalf("W=8N: rank %d differs from the reference at %d", r, i)
			}
		}
	}
}

// TestStartAllReduce: the Work form gives the blocking form's bits.
func TestStartAllReduce(t *testing.T) {
	world := localWorld(t, 3)
	rng := rand.New(rand.NewPCG(9, 10))
	xs := randomInputs(rng, 3, 500)
	ref := newRefWorld(3, onebit.PaddedLen(500, 3))
	want := ref.step(xs)
	errs := onEveryRank(world, func(c *comm.Comm, r int) error {
		st := onebit.NewState(500, 3)
		w := onebit.StartAllReduce(context.Background(), c, xs[r], st)
		if err := w.Wait(); err != nil {
			return err
		}
		if i, same := sameBits(xs[r], want); !same {
			return fmt.Errorf("rank %d differs from the reference at %d", r, i)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestBadInputFailsEveryRank: bad arguments on one rank are an error
// wrapping comm.ErrInvalid on every rank, naming that rank, promptly (the
// test's contexts would end a hang), with no state changed anywhere; and
// the world still works afterwards.
func TestBadInputFailsEveryRank(t *testing.T) {
	const n, l = 3, 50
	good := func() *onebit.State { return onebit.NewState(l, n) }
	cases := []struct {
		name string
		bad  func() (*onebit.State, int) // rank 1's state and buffer length
		want string
	}{
		{"nil state", func() (*onebit.State, int) { return nil, l }, "nil State"},
		{"W not a multiple of 8N", func() (*onebit.State, int) {
			return &onebit.State{WorkerError: make([]float32, 80), ServerError: make([]float32, 26)}, l
		}, "not a multiple of 8*Size()"},
		{"W below numel", func() (*onebit.State, int) { return good(), 100 }, "less than len(buf) = 100"},
		{"server error length", func() (*onebit.State, int) {
			st := good()
			st.ServerError = st.ServerError[:5]
			return st, l
		}, "len(st.ServerError) = 5"},
		{"W disagrees", func() (*onebit.State, int) {
			return &onebit.State{WorkerError: make([]float32, 144), ServerError: make([]float32, 48)}, l
		}, "ranks disagree"},
	}
	world := localWorld(t, n)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			states := make([]*onebit.State, n)
			bufs := make([][]float32, n)
			for r := range n {
				states[r], bufs[r] = good(), make([]float32, l)
				for i := range bufs[r] {
					bufs[r][i] = float32(i + r)
				}
			}
			var badLen int
			states[1], badLen = c.bad()
			bufs[1] = make([]float32, badLen)
			errs := onEveryRank(world, func(cm *comm.Comm, r int) error {
				return onebit.AllReduce(ctx, cm, bufs[r], states[r])
			})
			for r, err := range errs {
				if !errors.Is(err, comm.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("rank %d: err = %v, want comm.ErrInvalid saying %q", r, err, c.want)
				}
				if r != 1 && c.want != "ranks disagree" && !strings.Contains(err.Error(), "rank 1") {
					t.Errorf("rank %d: %v does not name rank 1", r, err)
				}
			}
			for r := range n {
				if r == 1 {
					continue
				}
				for i, v := range bufs[r] {
					if v != float32(i+r) {
						t.Fatalf("rank %d: buf changed at %d on a failed call", r, i)
					}
				}
				for _, v := range states[r].WorkerError {
					if v != 0 {
						t.Fatalf("rank %d: worker error changed on a failed call", r)
					}
				}
			}
		})
	}
	checkAgainstReference(t, world, 40, 2)
}

// TestWorldOfOne: the input comes back unchanged, the state untouched, and
// bad state is still reported.
func TestWorldOfOne(t *testing.T) {
	c := localWorld(t, 1)[0]
	buf := []float32{1, -2, float32(math.NaN()), 4}
	st := onebit.NewState(len(buf), 1)
	if err := onebit.AllReduce(context.Background(), c, buf, st); err != nil {
		t.Fatal(err)
	}
	if buf[0] != 1 || buf[1] != -2 || buf[2] == buf[2] || buf[3] != 4 {
		t.Fatalf("world of one changed its input: %v", buf)
	}
	for _, v := range st.WorkerError {
		if v != 0 {
			t.Fatal("world of one changed the state")
		}
	}
	err := onebit.AllReduce(context.Background(), c, buf, &onebit.State{WorkerError: make([]float32, 3)})
	if !errors.Is(err, comm.ErrInvalid) {
		t.Fatalf("bad state on a world of one: %v, want comm.ErrInvalid", err)
	}
	if err := onebit.AllReduce(context.Background(), nil, buf, st); !errors.Is(err, comm.ErrInvalid) {
		t.Fatalf("nil communicator: %v, want comm.ErrInvalid", err)
	}
}

// TestErrorFeedbackConverges checks §6.2's "why it converges" on a world of
// 3: the running mean of the outputs approaches the running mean of the
// true averages as O(1/T) (the gap is exactly -(mean worker error + server
// error)/T, up to float32 rounding), while the same run with the errors
// zeroed before every step stays biased.
func TestErrorFeedbackConverges(t *testing.T) {
	const n, l, steps = 3, 1000, 400
	run := func(feedback bool) (rel map[int]float64, identity float64) {
		world := localWorld(t, n)
		rng := rand.New(rand.NewPCG(11, 12))
		mu := make([]float64, l) // a fixed signal under per-step noise
		for i := range mu {
			mu[i] = rng.NormFloat64()
		}
		states := make([]*onebit.State, n)
		for r := range states {
			states[r] = onebit.NewState(l, n)
		}
		sumOut, sumTrue := make([]float64, l), make([]float64, l)
		rel = map[int]float64{}
		for step := 1; step <= steps; step++ {
			bufs := make([][]float32, n)
			for r := range bufs {
				bufs[r] = make([]float32, l)
				for i := range bufs[r] {
					bufs[r][i] = float32(mu[i] + rng.NormFloat64())
				}
				for i := range l {
					sumTrue[i] += float64(bufs[r][i]) / n
				}
				if !feedback {
					clear(states[r].WorkerError)
					clear(states[r].ServerError)
				}
			}
			errs := onEveryRank(world, func(c *comm.Comm, r int) error {
				return onebit.AllReduce(context.Background(), c, bufs[r], states[r])
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for i := range l {
				sumOut[i] += float64(bufs[0][i])
			}
			if step == 25 || step == 100 || step == steps {
				var num, den float64
				for i := range l {
					num += (sumOut[i] - sumTrue[i]) * (sumOut[i] - sumTrue[i])
					den += sumTrue[i] * sumTrue[i]
				}
				rel[step] = math.Sqrt(num / den)
			}
		}
		// The telescoped identity: Σ out - Σ true = -(mean_r e_r + s).
		c := len(states[0].ServerError)
		var num, den float64
		for i := range l {
			var e float64
			for r := range n {
				e += float64(states[r].WorkerError[i]) / n
			}
			s := float64(states[i/c].ServerError[i%c])
			d := sumOut[i] - sumTrue[i] + e + s
			num += d * d
			den += sumTrue[i] * sumTrue[i]
		}
		return rel, math.Sqrt(num / den)
	}
	fb, identity := run(true)
	t.Logf("with error feedback: relative error of the running mean %v; identity residual %.2g", fb, identity)
	if identity > 1e-4 {
		t.Errorf("the error-feedback identity is off by %.2g (relative)", identity)
	}
	if fb[steps] > 0.02 || fb[steps] > fb[25]/8 {
		t.Errorf("with error feedback the running mean does not approach the true one as 1/T: %v", fb)
	}
	nofb, _ := run(false)
	t.Logf("errors zeroed every step: %v", nofb)
	if nofb[steps] < 0.2 || nofb[steps] < 10*fb[steps] {
		t.Errorf("with the errors zeroed the running mean should stay biased: %v (feedback: %v)", nofb, fb)
	}
}
