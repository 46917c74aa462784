package onebit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/onebit"
)

// Malformed calls of package onebit's exported functions (issue 13, item
// 7): each returns a comm:-prefixed error wrapping comm.ErrInvalid (or
// comm.ErrNotMember) that says what to fix, on the malformed rank, and the
// well-formed rank of the same collective fails too instead of waiting.
// TestMalformedCallsCoverTheAPI fails when an exported function has no case
// here nor a reason in onebitAllowed.

type onebitCase struct {
	api, what string
	want      error
	says      string
	// call makes the call on c; bad is true on the malformed rank
	// (rank 0), false on rank 1, which makes the well-formed call.
	call func(ctx context.Context, c *comm.Comm, bad bool) error
}

// nilContext is the nil context.Context that malformed calls pass.
var nilContext context.Context

// wellFormed is an all-reduce of 16 floats on 2 ranks.
func wellFormed(ctx context.Context, c *comm.Comm) error {
	return onebit.AllReduce(ctx, c, make([]float32, 16), onebit.NewState(16, 2))
}

var onebitCases = []onebitCase{
	{"AllReduce", "nil State", comm.ErrInvalid, "nil State", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.AllReduce(ctx, c, make([]float32, 16), nil)
		}
		return wellFormed(ctx, c)
	}},
	{"AllReduce", "a State made for another size", comm.ErrInvalid, "not a multiple of 8*Size()", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.AllReduce(ctx, c, make([]float32, 16), onebit.NewState(16, 3))
		}
		return wellFormed(ctx, c)
	}},
	{"AllReduce", "a buffer longer than the State", comm.ErrInvalid, "is less than len(buf) = 17", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.AllReduce(ctx, c, make([]float32, 17), onebit.NewState(16, 2))
		}
		return wellFormed(ctx, c)
	}},
	{"AllReduce", "a State of a negative length", comm.ErrInvalid, "len(st.WorkerError) = 0 is less than len(buf) = 16", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.AllReduce(ctx, c, make([]float32, 16), onebit.NewState(-1, 2))
		}
		return wellFormed(ctx, c)
	}},
	{"AllReduce", "nil communicator", comm.ErrInvalid, "nil communicator", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.AllReduce(ctx, nil, make([]float32, 16), onebit.NewState(16, 2))
		}
		return nil
	}},
	{"AllReduce", "nil context", comm.ErrInvalid, "nil context", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.AllReduce(nilContext, c, make([]float32, 16), onebit.NewState(16, 2))
		}
		return wellFormed(ctx, c)
	}},
	{"StartAllReduce", "nil State", comm.ErrInvalid, "nil State", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.StartAllReduce(ctx, c, make([]float32, 16), nil).Wait()
		}
		return onebit.StartAllReduce(ctx, c, make([]float32, 16), onebit.NewState(16, 2)).Wait()
	}},
	{"StartAllReduce", "a zero communicator", comm.ErrNotMember, "", func(ctx context.Context, c *comm.Comm, bad bool) error {
		if bad {
			return onebit.StartAllReduce(ctx, new(comm.Comm), make([]float32, 16), onebit.NewState(16, 2)).Wait()
		}
		return nil
	}},
	{"NewState", "negative length and size", comm.ErrInvalid, "ranks disagree on len(st.WorkerError)", func(ctx context.Context, c *comm.Comm, bad bool) error {
		st := onebit.NewState(-5, -1) // empty, and AllReduce says so
		if bad {
			return onebit.AllReduce(ctx, c, nil, st)
		}
		return wellFormed(ctx, c)
	}},
}

// onebitAllowed: exported functions without malformed calls, and why.
var onebitAllowed = map[string]string{
	"PaddedLen": "total: 0 for a negative length or size, as documented",
}

func TestMalformedCallsCoverTheAPI(t *testing.T) {
	var cased []string
	for _, mc := range onebitCases {
		cased = append(cased, mc.api)
	}
	testkit.CheckAPICovered(t, ".", cased, onebitAllowed)
}

func TestMalformedCalls(t *testing.T) {
	for _, mc := range onebitCases {
		t.Run(mc.api+"/"+mc.what, func(t *testing.T) {
			world, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer testkit.CloseAll(world)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs := testkit.OnEveryRank(world, func(r int, c *comm.Comm) error { return mc.call(ctx, c, r == 0) })
			for r, err := range errs {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("rank %d waited for the deadline: %v", r, err)
				}
			}
			err = errs[0]
			switch {
			case err == nil:
				t.Fatal("rank 0: no error")
			case !strings.HasPrefix(err.Error(), "comm:") && !strings.HasPrefix(err.Error(), "onebit"):
				t.Errorf("rank 0: error names neither comm nor onebit: %v", err)
			case !errors.Is(err, mc.want) || !strings.Contains(err.Error(), mc.says):
				t.Errorf("rank 0: %v, want an error wrapping %v saying %q", err, mc.want, mc.says)
			}
			t.Logf("rank 0: %v; rank 1: %v", err, errs[1])
		})
	}
}
