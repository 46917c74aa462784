package optim_test

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
	"github.com/gocomm/comm/optim"
)

// Malformed calls of package optim's exported functions and methods
// (issue 13, item 7): each returns an error wrapping comm.ErrInvalid that
// says what to fix, never a panic. TestMalformedCallsCoverTheAPI fails
// when an exported function or method has no case here.

type optimCase struct {
	api, what, says string
	// call runs on rank 0 of a world of one.
	call func(ctx context.Context, c *comm.Comm) error
}

func params() [][]float32 { return [][]float32{make([]float32, 4), make([]float32, 2)} }

var optimCases = []optimCase{
	{"NewAdam", "a negative learning rate", "LR -1", func(context.Context, *comm.Comm) error {
		_, err := optim.NewAdam(optim.Config{LR: -1}, params()...)
		return err
	}},
	{"NewAdam", "a NaN epsilon", "Eps NaN", func(context.Context, *comm.Comm) error {
		_, err := optim.NewAdam(optim.Config{Eps: math.NaN()}, params()...)
		return err
	}},
	{"NewAdam", "Beta1 of 1", "Beta1 1", func(context.Context, *comm.Comm) error {
		_, err := optim.NewAdam(optim.Config{Beta1: 1}, params()...)
		return err
	}},
	{"NewAdam", "no parameters", "no parameter tensors", func(context.Context, *comm.Comm) error {
		_, err := optim.NewAdam(optim.Config{})
		return err
	}},
	{"Adam.Step", "one gradient for two tensors", "1 gradient tensors for 2", func(context.Context, *comm.Comm) error {
		a, err := optim.NewAdam(optim.Config{}, params()...)
		if err != nil {
			return err
		}
		return a.Step(make([]float32, 4))
	}},
	{"Adam.Step", "a nil *Adam", "nil *Adam", func(context.Context, *comm.Comm) error {
		var a *optim.Adam // as NewAdam returns it with an error
		return a.Step(make([]float32, 4))
	}},
	{"Adam.Steps", "a nil *Adam", "nil *Adam", func(context.Context, *comm.Comm) error {
		var a *optim.Adam
		if n := a.Steps(); n != 0 {
			return errors.New("Steps of a nil *Adam is not 0")
		}
		return a.Step()
	}},
	{"NewOnebitAdam", "nil communicator", "nil communicator", func(context.Context, *comm.Comm) error {
		_, err := optim.NewOnebitAdam(nil, optim.OnebitConfig{}, params()...)
		return err
	}},
	{"NewOnebitAdam", "negative FreezeStep", "FreezeStep -1", func(_ context.Context, c *comm.Comm) error {
		_, err := optim.NewOnebitAdam(c, optim.OnebitConfig{FreezeStep: -1}, params()...)
		return err
	}},
	{"OnebitAdam.Step", "a gradient of the wrong length", "gradient 1 has 3 values", func(ctx context.Context, c *comm.Comm) error {
		o, err := optim.NewOnebitAdam(c, optim.OnebitConfig{}, params()...)
		if err != nil {
			return err
		}
		return o.Step(ctx, make([]float32, 4), make([]float32, 3))
	}},
	{"OnebitAdam.Step", "a nil *OnebitAdam", "nil *OnebitAdam", func(ctx context.Context, _ *comm.Comm) error {
		var o *optim.OnebitAdam
		return o.Step(ctx, make([]float32, 4))
	}},
	{"OnebitAdam.Compressing", "a nil *OnebitAdam", "nil *OnebitAdam", func(ctx context.Context, _ *comm.Comm) error {
		var o *optim.OnebitAdam
		if o.Compressing() || o.Steps() != 0 {
			return errors.New("a nil *OnebitAdam compresses or has steps")
		}
		return o.Step(ctx)
	}},
	{"OnebitAdam.Steps", "a nil *OnebitAdam", "nil *OnebitAdam", func(ctx context.Context, _ *comm.Comm) error {
		var o *optim.OnebitAdam
		if o.Steps() != 0 {
			return errors.New("Steps of a nil *OnebitAdam is not 0")
		}
		return o.Step(ctx)
	}},
	{"Adam.StateBytes", "a nil *Adam", "nil *Adam", func(context.Context, *comm.Comm) error {
		var a *optim.Adam
		if n := a.StateBytes(); n != 0 {
			return errors.New("StateBytes of a nil *Adam is not 0")
		}
		return a.Step()
	}},
	{"NewZero", "stage 3", "Stage 3", func(ctx context.Context, c *comm.Comm) error {
		_, err := optim.NewZero(ctx, c, optim.ZeroConfig{Stage: 3}, params()...)
		return err
	}},
	{"NewZero", "no stage", "Stage 0", func(ctx context.Context, c *comm.Comm) error {
		_, err := optim.NewZero(ctx, c, optim.ZeroConfig{}, params()...)
		return err
	}},
	{"NewZero", "nil communicator", "nil communicator", func(ctx context.Context, _ *comm.Comm) error {
		_, err := optim.NewZero(ctx, nil, optim.ZeroConfig{Stage: 1}, params()...)
		return err
	}},
	{"NewZero", "a NaN learning rate", "LR NaN", func(ctx context.Context, c *comm.Comm) error {
		_, err := optim.NewZero(ctx, c, optim.ZeroConfig{Stage: 2, Config: optim.Config{LR: math.NaN()}}, params()...)
		return err
	}},
	{"NewZero", "a negative bucket cap", "BucketCapBytes", func(ctx context.Context, c *comm.Comm) error {
		_, err := optim.NewZero(ctx, c, optim.ZeroConfig{Stage: 2, Buckets: ddp.Options{BucketCapBytes: -1}}, params()...)
		return err
	}},
	{"Zero.Ready", "a gradient out of range", "Ready(2)", func(ctx context.Context, c *comm.Comm) error {
		z, err := optim.NewZero(ctx, c, optim.ZeroConfig{Stage: 1}, params()...)
		if err != nil {
			return err
		}
		return z.Ready(ctx, 2)
	}},
	{"Zero.Ready", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		return z.Ready(ctx, 0)
	}},
	{"Zero.Step", "a nil context", "nil context", func(ctx context.Context, c *comm.Comm) error {
		z, err := optim.NewZero(ctx, c, optim.ZeroConfig{Stage: 2}, params()...)
		if err != nil {
			return err
		}
		//lint:ignore SA1012 the nil context is the malformed call under test
		if err := z.Step(nil); !errors.Is(err, comm.ErrInvalid) {
			return err
		}
		for i := range 2 {
			if err := z.Ready(ctx, i); err != nil {
				return err
			}
		}
		if err := z.Step(ctx); err != nil { // the nil context did not break it
			return err
		}
		//lint:ignore SA1012 the nil context is the malformed call under test
		return z.Step(nil)
	}},
	{"Zero.Step", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		return z.Step(ctx)
	}},
	{"Zero.Grad", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		if z.Grad(0) != nil || z.Steps() != 0 || z.Stage() != 0 || z.StateBytes() != 0 {
			return errors.New("a nil *Zero has a gradient, steps, a stage or state")
		}
		return z.Step(ctx)
	}},
	{"Zero.Steps", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		if z.Steps() != 0 {
			return errors.New("Steps of a nil *Zero is not 0")
		}
		return z.Step(ctx)
	}},
	{"Zero.Stage", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		if z.Stage() != 0 {
			return errors.New("Stage of a nil *Zero is not 0")
		}
		return z.Step(ctx)
	}},
	{"Zero.StateBytes", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		if z.StateBytes() != 0 {
			return errors.New("StateBytes of a nil *Zero is not 0")
		}
		return z.Step(ctx)
	}},
	{"Zero.GradBytes", "a nil *Zero", "nil *Zero", func(ctx context.Context, _ *comm.Comm) error {
		var z *optim.Zero
		if z.GradBytes() != 0 {
			return errors.New("GradBytes of a nil *Zero is not 0")
		}
		return z.Step(ctx)
	}},
}

func TestMalformedCallsCoverTheAPI(t *testing.T) {
	var cased []string
	for _, mc := range optimCases {
		cased = append(cased, mc.api)
	}
	testkit.CheckAPICovered(t, ".", cased, nil)
}

func TestMalformedCalls(t *testing.T) {
	for _, mc := range optimCases {
		t.Run(mc.api+"/"+mc.what, func(t *testing.T) {
			world, err := comm.NewLocalWorld(1, comm.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer testkit.CloseAll(world)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic: %v", p)
					}
				}()
				return mc.call(ctx, world[0])
			}()
			if err == nil || !errors.Is(err, comm.ErrInvalid) || !strings.Contains(err.Error(), mc.says) {
				t.Fatalf("%v, want an error wrapping comm.ErrInvalid saying %q", err, mc.says)
			}
			if !strings.HasPrefix(err.Error(), "comm:") {
				t.Errorf("error not comm:-prefixed: %v", err)
			}
		})
	}
}
