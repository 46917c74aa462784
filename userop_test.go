package comm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/backend/native"
	"github.com/gocomm/comm/internal/testkit"
)

// TestUserOpPanicFailsEveryRank: a user-defined op that panics fails the
// collective on the rank where it panicked with ErrOpPanicked naming the
// op, and aborts it for the others: each fails the collective, or, if its
// part was done already (a Reduce's non-root ranks), its next one, with
// that reason instead of a wait; the process lives on.
func TestUserOpPanicFailsEveryRank(t *testing.T) {
	for _, a := range []string{"auto", "ring", "tree"} {
		t.Run(a, func(t *testing.T) {
			w := localWorld(t, 3)
			start := time.Now()
			errs := testkit.OnEveryRank(w, func(r int, c *comm.Comm) error {
				op, err := comm.NewOp(c, "boom", func(inout, in []float64) {
					if r == 0 {
						panic("user op bug")
					}
					for i := range inout {
						inout[i] += in[i]
					}
				}, true)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				buf := make([]float64, 1000)
				switch a {
				case "ring":
					err = comm.ReduceScatter(ctx, c, make([]float64, 3000), buf, op)
				case "tree":
					err = comm.Reduce(ctx, c, buf, buf, op, 0)
				default:
					err = comm.AllReduce(ctx, c, buf, buf, op)
				}
				if err == nil && r > 0 {
					err = comm.Barrier(ctx, c)
				}
				return err
			})
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the ranks took %v to fail", d)
			}
			for r, err := range errs {
				if err == nil {
					t.Fatalf("rank %d: no error", r)
				}
				if r == 0 && (!errors.Is(err, comm.ErrOpPanicked) || !strings.Contains(err.Error(), `"boom"`) || !strings.Contains(err.Error(), "user op bug")) {
					t.Errorf("rank 0: %v, want ErrOpPanicked naming the op and the panic", err)
				}
				if r > 0 && !strings.Contains(err.Error(), "boom") {
					t.Errorf("rank %d: %v, want the panicking rank's reason", r, err)
				}
			}
		})
	}
}

// TestUserOpArguments: bad ops and bad uses are ErrInvalid with a reason.
func TestUserOpArguments(t *testing.T) {
	w := localWorld(t, 1)
	c := w[0]
	if _, err := comm.NewOp[float32](c, "nil", nil, true); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("NewOp(nil): %v, want ErrInvalid", err)
	}
	add := func(inout, in []float32) {}
	a, err := comm.NewOp(c, "a", add, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := comm.PreMulSum(c, 2.5)
	if err != nil || a == b || !a.IsUser() || !b.IsUser() {
		t.Fatalf("handles %v, %v (%v): want two distinct user ops", a, b, err)
	}
	if err := c.FreeOp(a); err != nil {
		t.Fatal(err)
	}
	if err := c.FreeOp(a); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("FreeOp twice: %v, want ErrInvalid", err)
	}
	if again, _ := comm.NewOp(c, "again", add, false); again != a {
		t.Errorf("the freed handle %v was not reused (got %v): ranks freeing in one order would disagree", a, again)
	}
	if err := c.FreeOp(comm.Sum); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("FreeOp(Sum): %v, want ErrInvalid", err)
	}
	ctx := context.Background()
	// Each failed validation aborts the world; use a fresh one for each.
	uses := []struct {
		name string
		run  func(c *comm.Comm) error
		want string
	}{
		{"wrong type", func(c *comm.Comm) error {
			op, _ := comm.NewOp(c, "f32", add, true)
			return comm.AllReduce(ctx, c, []int64{1}, []int64{1}, op)
		}, `op "f32" (UserOp(64)) was made for float32 elements, not int64`},
		{"freed", func(c *comm.Comm) error {
			op, _ := comm.NewOp(c, "gone", add, true)
			c.FreeOp(op)
			return comm.Reduce(ctx, c, []float32{1}, []float32{1}, op, 0)
		}, "not a live op"},
		{"premul wrong type", func(c *comm.Comm) error {
			op, _ := comm.PreMulSum(c, int8(3))
			return comm.ReduceScatter(ctx, c, []float32{1}, []float32{1}, op)
		}, "was made for int8 elements, not float32"},
	}
	for _, u := range uses {
		c := localWorld(t, 1)[0]
		if err := u.run(c); !errors.Is(err, comm.ErrInvalid) || !strings.Contains(err.Error(), u.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", u.name, err, u.want)
		}
	}
}

// noUserOps is the native backend seen through backend.Comm alone, as a
// backend that does not implement backend.UserOpRunner.
type noUserOps struct{ native.Driver }

type plainComm struct{ backend.Comm }

func (d noUserOps) Open(ctx context.Context, cfg backend.Config) (backend.Comm, error) {
	c, err := d.Driver.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return plainComm{c}, nil
}

func init() { backend.Register("native-no-user-ops", noUserOps{}) }

// TestUserOpRefusedByBackend: a backend that does not run user-defined ops
// refuses them before sending anything, naming the op and the backend,
// and still runs PreMulSum.
func TestUserOpRefusedByBackend(t *testing.T) {
	opts := comm.Options{Timeout: time.Minute, Backend: "native-no-user-ops", Transport: comm.TransportOptions{Kind: comm.TransportTCP}}
	ctx := context.Background()
	errs := testkit.OnEveryRank(tcpWorld(t, 2, opts), func(r int, c *comm.Comm) error {
		pm, err := comm.PreMulSum(c, 3.0)
		if err != nil {
			return err
		}
		buf := []float64{float64(r + 1)}
		if err := comm.AllReduce(ctx, c, buf, buf, pm); err != nil || buf[0] != 9 {
			t.Errorf("rank %d: PreMulSum(3) of 1 and 2: %v, %v; want 9", r, buf, err)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
	// The refusal is a failed validation: it aborts this world.
	errs = testkit.OnEveryRank(tcpWorld(t, 2, opts), func(r int, c *comm.Comm) error {
		if c.Supports(comm.CapUserOps) {
			t.Errorf("rank %d: Supports(CapUserOps) on a backend that is no UserOpRunner", r)
		}
		op, err := comm.NewOp(c, "mine", func(inout, in []float64) {}, true)
		if err != nil {
			return err
		}
		err = comm.AllReduce(ctx, c, []float64{1}, []float64{1}, op)
		if !errors.Is(err, comm.ErrUserOpUnsupported) || !errors.Is(err, comm.ErrInvalid) || !strings.Contains(err.Error(), `op "mine"`) || !strings.Contains(err.Error(), "plainComm") {
			t.Errorf("rank %d: %v, want ErrUserOpUnsupported naming the op and the backend", r, err)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}

// TestPreMulSumReduceNonRootSharedPrefix: a non-root rank of a Reduce may
// pass a receive buffer that starts where its send buffer does but is
// shorter (the receive buffer is unused off the root); PreMulSum scales
// into a new buffer then, rather than writing past the receive buffer's end.
func TestPreMulSumReduceNonRootSharedPrefix(t *testing.T) {
	ctx := context.Background()
	errs := testkit.OnEveryRank(localWorld(t, 2), func(r int, c *comm.Comm) error {
		pm, err := comm.PreMulSum(c, float32(2))
		if err != nil {
			return err
		}
		send := []float32{float32(r + 1), float32(10 * (r + 1))}
		recv := send[:1]
		if r == 0 {
			recv = make([]float32, 2)
		}
		if err := comm.Reduce(ctx, c, send, recv, pm, 0); err != nil {
			return err
		}
		if r == 0 && (recv[0] != 6 || recv[1] != 60) {
			t.Errorf("root: %v, want [6 60]", recv)
		}
		if r == 1 && (send[0] != 2 || send[1] != 20) {
			t.Errorf("rank 1's send buffer changed to %v", send)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}
