package onebit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/onebit"
)

// localWorld returns a world of n ranks in this process, closed at the end
// of the test.
func localWorld(t testing.TB, n int) []*comm.Comm {
	t.Helper()
	return testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	})
}

// onEveryRank runs fn on every rank of world at once and returns the
// errors by rank.
func onEveryRank(world []*comm.Comm, fn func(c *comm.Comm, r int) error) []error {
	return testkit.OnEveryRank(world, func(r int, c *comm.Comm) error { return fn(c, r) })
}

// randomInputs returns n vectors of l values: moderate random values, with
// exact zeros of both signs sprinkled in.
func randomInputs(rng *rand.Rand, n, l int) [][]float32 {
	xs := make([][]float32, n)
	for r := range xs {
		xs[r] = make([]float32, l)
		for i := range xs[r] {
			switch rng.IntN(20) {
			case 0:
				xs[r][i] = 0
			case 1:
				xs[r][i] = float32(math.Copysign(0, -1))
			default:
				xs[r][i] = float32(rng.NormFloat64())
			}
		}
	}
	return xs
}

func sameBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

// TestAllReduceMatchesReference runs many iterations on 1 to 5 ranks,
// lengths that do and do not fill the padded length, and checks every
// rank's result and errors bit for bit against refWorld.
func TestAllReduceMatchesReference(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for _, l := range []int{1, 7, 8 * n, 8*n + 3, onebit.PaddedLen(100, n), 1000, 4099} {
			t.Run(fmt.Sprintf("n=%d/len=%d", n, l), func(t *testing.T) {
				checkAgainstReference(t, localWorld(t, n), l, 12)
			})
		}
	}
}

func checkAgainstReference(t *testing.T, world []*comm.Comm, l, iters int) {
	t.Helper()
	n := len(world)
	rng := rand.New(rand.NewPCG(uint64(n), uint64(l)))
	states := make([]*onebit.State, n)
	for r := range states {
		states[r] = onebit.NewState(l, n)
	}
	w := len(states[0].WorkerError)
	ref := newRefWorld(n, w)
	for it := range iters {
		xs := randomInputs(rng, n, l)
		bufs := make([][]float32, n)
		for r := range bufs {
			bufs[r] = append([]float32(nil), xs[r]...)
		}
		errs := onEveryRank(world, func(c *comm.Comm, r int) error {
			return onebit.AllReduce(context.Background(), c, bufs[r], states[r])
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if n == 1 {
			if i, same := sameBits(bufs[0], xs[0]); !same {
				t.Fatalf("world of one changed its input at %d", i)
			}
			continue
		}
		want := ref.step(xs)
		for r := range n {
			if i, same := sameBits(bufs[r], want); !same {
				t.Fatalf("iteration %d rank %d: result differs from the reference at %d: %v, want %v", it, r, i, bufs[r][i], want[i])
			}
			if i, same := sameBits(states[r].WorkerError, ref.workerError[r]); !same {
				t.Fatalf("iteration %d rank %d: worker error differs at %d", it, r, i)
			}
			if i, same := sameBits(states[r].ServerError, ref.serverError[r]); !same {
				t.Fatalf("iteration %d rank %d: server error differs at %d", it, r, i)
			}
		}
	}
}
