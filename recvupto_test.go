package comm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/profile"
)

// reading is a named element type, as user code has them.
type reading float32

// TestRecvUpTo: on every transport, messages of 0 to len(buf) elements
// land in buf[:n] with n and the sender returned and buf[n:] untouched,
// from a named rank and from AnySource, blocking and started.
func TestRecvUpTo(t *testing.T) {
	forEachTransport(t, 3, func(t *testing.T, run func(func(ctx context.Context, c *comm.Comm) error) []error) {
		lengths := []int{0, 3, 10, 4000}
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			if !c.Supports(comm.CapRecvUpTo) {
				return errors.New("Supports(CapRecvUpTo) is false on the native backend")
			}
			if c.Rank() != 1 {
				for _, n := range lengths {
					msg := make([]reading, n)
					for i := range msg {
						msg[i] = reading(100*c.Rank() + i)
					}
					if err := comm.Send(ctx, c, msg, 1, n); err != nil {
						return err
					}
				}
				return nil
			}
			for _, n := range lengths {
				for _, src := range []int{0, comm.AnySource} {
					buf := slices.Repeat([]reading{-1}, 4000+5)
					var got, from int
					var err error
					if src == 0 {
						got, from, err = comm.RecvUpTo(ctx, c, buf, src, n)
					} else {
						w := comm.StartRecvUpTo(ctx, c, buf, src, n)
						if w.Count() != -1 && !isDone(w) {
							return errors.New("Count before completion is not -1")
						}
						err = w.Wait()
						got, from = w.Count(), w.Source()
					}
					if err != nil {
						return err
					}
					if got != n || (src == 0 && from != 0) || (src != 0 && from != 2) {
						return fmt.Errorf("RecvUpTo(src %d) of %d elements: n %d from %d", src, n, got, from)
					}
					for i, v := range buf {
						want := reading(-1)
						if i < n {
							want = reading(100*from + i)
						}
						if v != want {
							return fmt.Errorf("RecvUpTo(src %d) of %d elements: buf[%d] = %v, want %v", src, n, i, v, want)
						}
					}
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
}

// TestRecvUpToTooLong: a message longer than the buffer is an ErrLength
// naming both lengths on the receiver only; the message is consumed, the
// next one arrives, and the communicator goes on (a collective after it
// works).
func TestRecvUpToTooLong(t *testing.T) {
	forEachTransport(t, 2, func(t *testing.T, run func(func(ctx context.Context, c *comm.Comm) error) []error) {
		errs := run(func(ctx context.Context, c *comm.Comm) error {
			if c.Rank() == 0 {
				for _, msg := range [][]float64{make([]float64, 12), {1, 2}, make([]float64, 3000)} {
					if err := comm.Send(ctx, c, msg, 1, 5); err != nil {
						return err
					}
				}
			} else {
				buf := make([]float64, 8)
				_, from, err := comm.RecvUpTo(ctx, c, buf, 0, 5)
				if !errors.Is(err, comm.ErrLength) || !strings.Contains(err.Error(), "12 elements") || !strings.Contains(err.Error(), "holds 8") || from != -1 {
					return fmt.Errorf("12 elements into 8: from %d, %v; want ErrLength naming 12 and 8", from, err)
				}
				n, from, err := comm.RecvUpTo(ctx, c, buf, 0, 5)
				if err != nil || n != 2 || from != 0 || buf[0] != 1 || buf[1] != 2 {
					return fmt.Errorf("the message after: n %d from %d buf %v, %v", n, from, buf[:2], err)
				}
				_, _, err = comm.RecvUpTo(ctx, c, buf, comm.AnySource, 5)
				if !errors.Is(err, comm.ErrLength) || !strings.Contains(err.Error(), "3000 elements") {
					return fmt.Errorf("3000 elements into 8: %v", err)
				}
			}
			sum := []int{1}
			if err := comm.AllReduce(ctx, c, sum, sum, comm.Sum); err != nil || sum[0] != 2 {
				return fmt.Errorf("AllReduce after the failed receive: %v, %v", sum, err)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
}

// TestRecvUpToBadArguments: the checks of Recv apply.
func TestRecvUpToBadArguments(t *testing.T) {
	world := localWorld(t, 2)
	ctx := context.Background()
	for _, tt := range []struct{ src, tag int }{{5, 0}, {0, -1}, {-2, 0}} {
		if _, _, err := comm.RecvUpTo(ctx, world[1], make([]int, 2), tt.src, tt.tag); !errors.Is(err, comm.ErrInvalid) {
			t.Errorf("RecvUpTo(src %d, tag %d) = %v, want ErrInvalid", tt.src, tt.tag, err)
		}
	}
}

// TestRecvUpToProfiled: the comms logger records the message's size, not
// the buffer's.
func TestRecvUpToProfiled(t *testing.T) {
	world := profiledWorld(t, 2, profile.Config{})
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		if c.Rank() == 0 {
			return comm.Send(ctx, c, []float32{1, 2, 3}, 1, 0)
		}
		_, _, err := comm.RecvUpTo(ctx, c, make([]float32, 100), 0, 0)
		return err
	})
	for _, rec := range world[1].Profiler().Records() {
		if rec.Op == profile.OpRecv && (rec.Bytes != 12 || rec.TotalBytes != 12 || rec.Peer != 0) {
			t.Errorf("Recv record: %d bytes (total %d) from %d, want 12 from 0", rec.Bytes, rec.TotalBytes, rec.Peer)
		}
	}
	if len(world[1].Profiler().Records()) != 1 {
		t.Errorf("rank 1: %d records, want 1", len(world[1].Profiler().Records()))
	}
}
