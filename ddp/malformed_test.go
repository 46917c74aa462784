package ddp_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// Malformed calls of package ddp's exported functions and methods: each
// returns a comm:-prefixed error wrapping comm.ErrInvalid that says what
// to fix, never a panic or a hang. (A registration that is malformed on
// one rank only fails every rank: TestMismatchedRegistration.)
// TestMalformedCallsCoverTheAPI fails when an exported function or method
// has no case here nor a reason in ddpAllowed.

type ddpCase struct {
	api, what, says string
	// call runs on the only rank of a world of one.
	call func(ctx context.Context, c *comm.Comm) error
}

// nilContext is the nil context.Context that malformed calls pass.
var nilContext context.Context

// newReducer is a Reducer of shapesA on c.
func newReducer(ctx context.Context, c *comm.Comm) (*ddp.Reducer[float32], error) {
	return ddp.New[float32](ctx, c, shapesA, ddp.Options{})
}

// hookCases are the malformed calls of a hook: a nil bucket, and a nil
// communicator.
func hookCases(api string, h func() ddp.Hook[float32]) []ddpCase {
	return []ddpCase{
		{api, "a nil bucket", "nil *Bucket", func(ctx context.Context, c *comm.Comm) error {
			return h()(ctx, c, nil).Wait()
		}},
		{api, "a nil communicator", "nil", func(ctx context.Context, c *comm.Comm) error {
			return h()(ctx, nil, &ddp.Bucket[float32]{Data: make([]float32, 4)}).Wait()
		}},
	}
}

var ddpCases = append([]ddpCase{
	{"New", "a nil communicator", "nil *comm.Comm", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, nil, shapesA, ddp.Options{})
		return err
	}},
	{"New", "a nil context", "nil context", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](nilContext, c, shapesA, ddp.Options{})
		return err
	}},
	{"New", "a negative dimension", "gradient 1 [4 -1]: dimension -1 is negative", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, c, [][]int{{3}, {4, -1}}, ddp.Options{})
		return err
	}},
	{"New", "no gradients", "no gradients", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, c, nil, ddp.Options{})
		return err
	}},
	{"New", "a gradient too large for memory", "more elements than", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, c, [][]int{{math.MaxInt / 2, 4}}, ddp.Options{})
		return err
	}},
	{"New", "gradients too large together", "more elements than", func(ctx context.Context, c *comm.Comm) error {
		// Each fits the 128 TiB of a 64-bit address space, not both.
		_, err := ddp.New[float32](ctx, c, [][]int{{1 << 30, 1 << 14}, {1 << 30, 1 << 15}}, ddp.Options{})
		return err
	}},
	{"New", "a negative bucket cap", "Options.BucketCapBytes is -1", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{BucketCapBytes: -1})
		return err
	}},
	{"New", "a negative first bucket cap", "Options.FirstBucketCapBytes is -5", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{FirstBucketCapBytes: -5})
		return err
	}},
	{"New", "a negative bucket buffer count", "Options.BucketBuffers is -2", func(ctx context.Context, c *comm.Comm) error {
		_, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{BucketBuffers: -2})
		return err
	}},
	{"Reducer.Ready", "no_sync with pooled buckets", "SetSync(false) with Options.BucketBuffers", func(ctx context.Context, c *comm.Comm) error {
		r, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{BucketBuffers: 2})
		if err != nil {
			return err
		}
		r.SetSync(false)
		return r.Ready(ctx, 0)
	}},
	{"Reducer.Wait", "no_sync with pooled buckets", "SetSync(false) with Options.BucketBuffers", func(ctx context.Context, c *comm.Comm) error {
		r, err := ddp.New[float32](ctx, c, shapesA, ddp.Options{BucketBuffers: 1})
		if err != nil {
			return err
		}
		r.SetSync(false)
		return r.Wait(ctx)
	}},
	{"Reducer.Ready", "a negative index", "Ready(-1): there are 10 gradients, 0 to 9", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		return r.Ready(ctx, -1)
	}},
	{"Reducer.Ready", "an index past the end", "Ready(10)", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		return r.Ready(ctx, 10)
	}},
	{"Reducer.Ready", "a gradient marked twice", "gradient 4 [40] was already marked ready", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		if err := r.Ready(ctx, 4); err != nil {
			return err
		}
		return r.Ready(ctx, 4)
	}},
	{"Reducer.Ready", "a nil context", "nil context", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		return r.Ready(nilContext, 0)
	}},
	{"Reducer.Ready", "a nil *Reducer", "not made by New", func(ctx context.Context, c *comm.Comm) error {
		var r *ddp.Reducer[float32] // as New returns it with an error
		return r.Ready(ctx, 0)
	}},
	{"Reducer.Wait", "a nil context", "nil context", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		return r.Wait(nilContext)
	}},
	{"Reducer.Wait", "a zero Reducer", "not made by New", func(ctx context.Context, c *comm.Comm) error {
		return new(ddp.Reducer[float32]).Wait(ctx)
	}},
	{"Reducer.Wait", "a hook that returns no Work", "nil *comm.Work for bucket 0", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		if err := r.SetHook(func(context.Context, *comm.Comm, *ddp.Bucket[float32]) *comm.Work { return nil }); err != nil {
			return err
		}
		for i := range r.Len() {
			if err := r.Ready(ctx, i); err != nil {
				return err
			}
		}
		err = r.Wait(ctx)
		// Then the Reducer is done for.
		if again := r.Ready(ctx, 0); again == nil || !strings.Contains(again.Error(), "an earlier step failed") {
			return errors.New("Ready after a failed step did not say so")
		}
		return err
	}},
	{"Reducer.SetHook", "a nil hook", "SetHook(nil)", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		return r.SetHook(nil)
	}},
	{"Reducer.SetHook", "a hook set during a step", "SetHook during a step", func(ctx context.Context, c *comm.Comm) error {
		r, err := newReducer(ctx, c)
		if err != nil {
			return err
		}
		if err := r.Ready(ctx, 0); err != nil {
			return err
		}
		return r.SetHook(ddp.AllReduceHook[float32]())
	}},
	{"Reducer.SetHook", "a nil *Reducer", "not made by New", func(ctx context.Context, c *comm.Comm) error {
		var r *ddp.Reducer[float32]
		return r.SetHook(ddp.AllReduceHook[float32]())
	}},
	{"HookFunc", "a nil function", "HookFunc(nil)", func(ctx context.Context, c *comm.Comm) error {
		return ddp.HookFunc[float32](nil)(ctx, c, &ddp.Bucket[float32]{Data: make([]float32, 2)}).Wait()
	}},
}, slicesConcat(
	hookCases("AllReduceHook", ddp.AllReduceHook[float32]),
	hookCases("FP16CompressHook", ddp.FP16CompressHook),
	hookCases("BF16CompressHook", ddp.BF16CompressHook),
	hookCases("OnebitHook", ddp.OnebitHook),
)...)

func slicesConcat(s ...[]ddpCase) []ddpCase {
	var out []ddpCase
	for _, c := range s {
		out = append(out, c...)
	}
	return out
}

// ddpAllowed: exported methods without malformed calls, and why.
var ddpAllowed = map[string]string{
	"Reducer.Grad":        "total: nil out of range or on a nil *Reducer (TestTotalMethods)",
	"Reducer.Shape":       "total: nil out of range, like Grad",
	"Reducer.Len":         "total: 0 on a nil *Reducer",
	"Reducer.Buckets":     "total: nil on a nil *Reducer",
	"Reducer.SetSync":     "total: any bool; nothing on a nil *Reducer",
	"Reducer.ZeroGrad":    "total: nothing on a nil *Reducer",
	"Reducer.Spare":       "total: nil without a pool, during a step, or on a nil *Reducer",
	"Reducer.BucketBytes": "total: 0 on a nil *Reducer",
}

func TestMalformedCallsCoverTheAPI(t *testing.T) {
	var cased []string
	for _, mc := range ddpCases {
		cased = append(cased, mc.api)
	}
	testkit.CheckAPICovered(t, ".", cased, ddpAllowed)
}

func TestMalformedCalls(t *testing.T) {
	for _, mc := range ddpCases {
		t.Run(mc.api+"/"+mc.what, func(t *testing.T) {
			world, err := comm.NewLocalWorld(1, comm.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer testkit.CloseAll(world)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			problem, err := testkit.MalformedOutcome(10*time.Second, func() error { return mc.call(ctx, world[0]) })
			if problem != "" {
				t.Fatal(problem)
			}
			if p := testkit.CheckMalformedError(err, comm.ErrInvalid, mc.says); p != "" {
				t.Fatal(p)
			}
		})
	}
}

// TestTotalMethods: the methods without an error answer out-of-range
// indices and nil or zero Reducers without panicking.
func TestTotalMethods(t *testing.T) {
	world, err := comm.NewLocalWorld(1, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer testkit.CloseAll(world)
	r, err := newReducer(context.Background(), world[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.Grad(-1) != nil || r.Grad(10) != nil || r.Shape(-1) != nil || r.Shape(10) != nil || r.Grad(9) == nil {
		t.Error("Grad or Shape out of range is not nil, or in range is")
	}
	for _, zero := range []*ddp.Reducer[float32]{nil, new(ddp.Reducer[float32])} {
		zero.SetSync(false)
		zero.ZeroGrad()
		if zero.Grad(0) != nil || zero.Shape(0) != nil || zero.Len() != 0 || len(zero.Buckets()) != 0 || zero.Spare() != nil || zero.BucketBytes() != 0 {
			t.Errorf("a zero Reducer (%p) has gradients", zero)
		}
	}
}
