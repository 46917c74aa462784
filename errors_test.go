package comm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
)

// each runs f on every rank of a fresh world of n ranks, for every
// transport, and returns the errors by rank.
func forEachTransport(t *testing.T, n int, f func(t *testing.T, run func(func(ctx context.Context, c *comm.Comm) error) []error)) {
	for _, fac := range factories() {
		t.Run(fac.name, func(t *testing.T) {
			world := fac.make(t, n, comm.Algorithms{})
			f(t, func(body func(ctx context.Context, c *comm.Comm) error) []error {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i, c := range world {
					wg.Add(1)
					go func() { defer wg.Done(); errs[i] = body(ctx, c) }()
				}
				wg.Wait()
				return errs
			})
		})
	}
}

func wantIs(t *testing.T, rank int, err, target error, fragments ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("rank %d: error %v, want one matching %v", rank, err, target)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("rank %d: error %q does not mention %q", rank, err, f)
		}
	}
}

func TestWrongLengthFailsEveryRank(t *testing.T) {
	forEachTransport(t, 3, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			send := make([]float32, 8)
			recv := make([]float32, 8)
			if c.Rank() == 1 {
				recv = recv[:5]
			}
			return comm.AllReduce(ctx, c, send, recv, comm.Sum)
		})
		wantIs(t, 1, errs[1], comm.ErrInvalid, "len(send) = 8", "len(recv) = 5")
		for _, r := range []int{0, 2} {
			wantIs(t, r, errs[r], comm.ErrAborted, "rank 1")
		}
	})
}

func TestMismatchedCollectivesNameBothCalls(t *testing.T) {
	forEachTransport(t, 2, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			buf := make([]float32, 10)
			if c.Rank() == 0 {
				return comm.AllReduce(ctx, c, buf, buf, comm.Sum)
			}
			return comm.Broadcast(ctx, c, buf, 0)
		})
		mismatches := 0
		for r, err := range errs {
			if err == nil {
				t.Fatalf("rank %d: no error", r)
			}
			if errors.Is(err, comm.ErrMismatch) {
				mismatches++
				wantIs(t, r, err, comm.ErrMismatch, "AllReduce(float32, count 10, Sum)", "Broadcast(float32, count 10, root 0)")
			} else {
				wantIs(t, r, err, comm.ErrAborted)
			}
		}
		if mismatches == 0 {
			t.Errorf("no rank reported ErrMismatch: %v", errs)
		}
	})
}

func TestMismatchedCountsDetected(t *testing.T) {
	forEachTransport(t, 3, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			buf := make([]int64, 10+2*(c.Rank()/2))
			return comm.AllReduce(ctx, c, buf, buf, comm.Max)
		})
		found := false
		for r, err := range errs {
			if err == nil {
				t.Fatalf("rank %d: no error", r)
			}
			found = found || errors.Is(err, comm.ErrMismatch)
		}
		if !found {
			t.Errorf("no rank reported ErrMismatch: %v", errs)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	cases := []struct {
		name string
		call func(ctx context.Context, c *comm.Comm) error
		want []string
	}{
		{"bad root", func(ctx context.Context, c *comm.Comm) error {
			return comm.Broadcast(ctx, c, []int32{1}, 7)
		}, []string{"root 7 out of range"}},
		{"bitwise op on floats", func(ctx context.Context, c *comm.Comm) error {
			b := []float64{1}
			return comm.AllReduce(ctx, c, b, b, comm.BXor)
		}, []string{"BXor", "float64"}},
		{"all-gather length", func(ctx context.Context, c *comm.Comm) error {
			return comm.AllGather(ctx, c, []int8{1, 2}, make([]int8, 3))
		}, []string{"len(recv) = 3"}},
		{"all-to-all not divisible", func(ctx context.Context, c *comm.Comm) error {
			return comm.AllToAll(ctx, c, make([]int8, 3), make([]int8, 3))
		}, []string{"not a multiple"}},
		{"counts length", func(ctx context.Context, c *comm.Comm) error {
			return comm.AllGatherV(ctx, c, []int8{1}, make([]int8, 1), []int{1})
		}, []string{"len(counts) = 1"}},
		{"overlapping buffers", func(ctx context.Context, c *comm.Comm) error {
			b := make([]float32, 8)
			return comm.AllReduce(ctx, c, b[:6], b[2:], comm.Sum)
		}, []string{"overlap"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachTransport(t, 2, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
				for r, err := range run(tc.call) {
					wantIs(t, r, err, comm.ErrInvalid, tc.want...)
				}
			})
		})
	}
}

func TestPointToPointArguments(t *testing.T) {
	w, err := comm.NewLocalWorld(2, comm.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(w)
	ctx := context.Background()
	wantIs(t, 0, comm.Send(ctx, w[0], []int8{1}, 0, 0), comm.ErrInvalid, "is this rank")
	wantIs(t, 0, comm.Send(ctx, w[0], []int8{1}, 2, 0), comm.ErrInvalid, "out of range")
	wantIs(t, 0, comm.Send(ctx, w[0], []int8{1}, 1, -1), comm.ErrInvalid, "tag -1")
	// Point-to-point errors are local: the world still works.
	works := make([]*comm.Work, len(w))
	for i, c := range w {
		buf := []int8{1}
		works[i] = comm.StartAllReduce(ctx, c, buf, buf, comm.Sum)
	}
	for _, wk := range works {
		if err := wk.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAllToAllVDisagreeingSplits(t *testing.T) {
	forEachTransport(t, 2, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			// Rank 0 sends 2 elements to rank 1, which expects 3.
			send, recv := []int{1, 1}, []int{1, 3}
			if c.Rank() == 1 {
				send, recv = []int{3, 1}, []int{2, 1}
				send[0] = 3
			}
			return comm.AllToAllV(ctx, c, make([]int32, send[0]+send[1]), make([]int32, recv[0]+recv[1]), send, recv)
		})
		found := false
		for _, err := range errs {
			found = found || errors.Is(err, comm.ErrLength) || errors.Is(err, comm.ErrMismatch)
		}
		if !found {
			t.Errorf("want ErrLength on some rank, got %v", errs)
		}
	})
}

func TestClosedPeerFailsPendingCollective(t *testing.T) {
	forEachTransport(t, 3, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		start := time.Now()
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			if c.Rank() == 2 {
				return c.Close()
			}
			buf := make([]float32, 4)
			return comm.AllReduce(ctx, c, buf, buf, comm.Sum)
		})
		if errs[2] != nil {
			t.Fatalf("Close: %v", errs[2])
		}
		for _, r := range []int{0, 1} {
			if errs[r] == nil {
				t.Fatalf("rank %d: all-reduce without rank 2 succeeded", r)
			}
			if !errors.Is(errs[r], comm.ErrPeerClosed) && !errors.Is(errs[r], comm.ErrAborted) {
				t.Errorf("rank %d: %v, want ErrPeerClosed or ErrAborted", r, errs[r])
			}
			if !strings.Contains(errs[r].Error(), "rank 2") {
				t.Errorf("rank %d: error %q does not name rank 2", r, errs[r])
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("failing took %v", d)
		}
	})
}

func TestTimeoutNamesTheMissingPeer(t *testing.T) {
	forEachTransport(t, 2, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			if c.Rank() == 1 {
				return nil // never joins
			}
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			buf := make([]float32, 4)
			return comm.AllReduce(ctx, c, buf, buf, comm.Sum)
		})
		wantIs(t, 0, errs[0], context.DeadlineExceeded, "rank 1", "AllReduce")
	})
}

func TestNonMemberAndGroupErrors(t *testing.T) {
	forEachTransport(t, 3, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			g, err := c.NewGroup(ctx, []int{2, 0})
			if err != nil {
				return err
			}
			buf := []int32{int32(c.Rank() + 1)}
			err = comm.AllReduce(ctx, g, buf, buf, comm.Sum)
			if c.Rank() == 1 {
				if g.Rank() != -1 || !errors.Is(err, comm.ErrNotMember) {
					return errors.New("non-member: want Rank -1 and ErrNotMember, got " + errString(err))
				}
				return nil
			}
			if err != nil {
				return err
			}
			if buf[0] != 4 {
				return errors.New("group sum wrong")
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
	forEachTransport(t, 2, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			_, err := c.NewGroup(ctx, []int{0, 1}[:1+c.Rank()])
			return err
		})
		for r, err := range errs {
			wantIs(t, r, err, comm.ErrMismatch, "different rank list")
		}
	})
}

func TestMonitoredBarrierNamesLateRank(t *testing.T) {
	forEachTransport(t, 3, func(t *testing.T, run func(func(context.Context, *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			if c.Rank() == 2 {
				time.Sleep(800 * time.Millisecond)
			}
			return comm.MonitoredBarrier(ctx, c, 200*time.Millisecond, true)
		})
		for r, err := range errs {
			wantIs(t, r, err, comm.ErrBarrierTimeout, "rank(s) 2 failed to pass MonitoredBarrier")
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
