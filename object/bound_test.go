package object_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// A rank that announces an impossible encoding size (a corrupt or
// hostile peer, played here by a raw collective in the object collective's
// place) fails the others with ErrLength before they allocate for it; a
// make of 2^62 bytes panicked before.
func TestSizesBoundedBeforeAllocation(t *testing.T) {
	for _, tt := range []struct {
		name  string
		liar  func(ctx context.Context, c *comm.Comm) error
		other func(ctx context.Context, c *comm.Comm) error
	}{
		{"Broadcast",
			func(ctx context.Context, c *comm.Comm) error { return comm.Broadcast(ctx, c, []int64{1 << 62}, 0) },
			func(ctx context.Context, c *comm.Comm) error {
				var v string
				return object.Broadcast(ctx, c, &v, 0)
			}},
		{"Scatter",
			func(ctx context.Context, c *comm.Comm) error { return comm.Broadcast(ctx, c, []int64{8, -5}, 0) },
			func(ctx context.Context, c *comm.Comm) error {
				_, err := object.Scatter[string](ctx, c, nil, 0)
				return err
			}},
		{"AllGather",
			func(ctx context.Context, c *comm.Comm) error {
				return comm.AllGather(ctx, c, []int64{1 << 62, 0}, make([]int64, 4))
			},
			func(ctx context.Context, c *comm.Comm) error { _, err := object.AllGather(ctx, c, "x"); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := localWorld(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tt.liar(ctx, w[0]) }()
			err := tt.other(ctx, w[1])
			<-done
			if !errors.Is(err, comm.ErrLength) || !strings.Contains(err.Error(), "rank 0 announced") {
				t.Errorf("got %v, want ErrLength naming rank 0's announcement", err)
			}
		})
	}
}
