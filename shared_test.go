package comm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/profile"
)

// TestAllocSharedAllReduce: on a world in one host's shared memory,
// AllocShared gives memory every rank maps, and an all-reduce of it runs
// in place ("shared-direct" in the comms logger) with the exact result;
// one rank's ordinary recv sends every rank to the stage. FreeShared
// releases it.
func TestAllocSharedAllReduce(t *testing.T) {
	const n = 3*(64<<10) + 5
	w := tcpWorld(t, 3, comm.Options{Timeout: time.Minute, Backend: "native-shm", Profile: &profile.Config{Enabled: true}})
	onEveryRank(t, w, func(ctx context.Context, c *comm.Comm) error {
		a, err := comm.AllocShared[float32](ctx, c, n)
		if err != nil {
			return err
		}
		b, err := comm.AllocShared[float32](ctx, c, n)
		if err != nil {
			return err
		}
		if !comm.IsShared(c, a) || !comm.IsShared(c, b[10:20]) || comm.IsShared(c, make([]float32, 4)) {
			return fmt.Errorf("IsShared: %v %v %v", comm.IsShared(c, a), comm.IsShared(c, b[10:20]), comm.IsShared(c, make([]float32, 4)))
		}
		for i := range a {
			a[i] = float32(c.Rank()*1000 + i%977)
		}
		want := func(i int) float32 { return float32((0+1+2)*1000 + 3*(i%977)) }
		c.Profiler().Reset()
		if err := comm.AllReduce(ctx, c, a, b, comm.Sum); err != nil {
			return err
		}
		if err := comm.AllReduce(ctx, c, a, a, comm.Sum); err != nil {
			return err
		}
		ordinary := b
		if c.Rank() == 1 {
			ordinary = make([]float32, n)
		}
		if err := comm.AllReduce(ctx, c, b, ordinary, comm.Max); err != nil {
			return err
		}
		for i := range a {
			if a[i] != want(i) || b[i] != want(i) || ordinary[i] != want(i) {
				return fmt.Errorf("element %d: %v %v %v, want %v", i, a[i], b[i], ordinary[i], want(i))
			}
		}
		var algs []string
		for _, r := range c.Profiler().Records() {
			if r.Op == "all_reduce" {
				algs = append(algs, r.Algorithm)
			}
		}
		if fmt.Sprint(algs) != "[shared-direct shared-direct shared-stage]" {
			return fmt.Errorf("algorithms %v, want shared-direct twice then shared-stage", algs)
		}
		for _, buf := range [][]float32{a, b} {
			if err := comm.FreeShared(c, buf); err != nil {
				return err
			}
		}
		if comm.IsShared(c, a) {
			return errors.New("still shared after FreeShared")
		}
		return comm.FreeShared(c, a) // freed already: left alone
	})
}

// TestAllocSharedLengths: ranks asking for different lengths all get an
// error saying so, and nothing is allocated.
func TestAllocSharedLengths(t *testing.T) {
	w := tcpWorld(t, 2, comm.Options{Timeout: time.Minute, Backend: "native-shm"})
	onEveryRank(t, w, func(ctx context.Context, c *comm.Comm) error {
		buf, err := comm.AllocShared[int32](ctx, c, 100+c.Rank())
		if !errors.Is(err, comm.ErrMismatch) || buf != nil {
			return fmt.Errorf("AllocShared of different lengths: %v, %d elements; want ErrMismatch", err, len(buf))
		}
		if _, err := comm.AllocShared[int32](ctx, c, -1); !errors.Is(err, comm.ErrInvalid) {
			return fmt.Errorf("AllocShared(-1): %v, want ErrInvalid", err)
		}
		return nil
	})
}

// TestAllocSharedOrdinary: where memory cannot be shared (TCP, ranks in
// one process without a segment, a group) AllocShared gives ordinary
// memory that works as any other, and FreeShared leaves it alone.
func TestAllocSharedOrdinary(t *testing.T) {
	local, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(local) })
	for name, w := range map[string][]*comm.Comm{
		"tcp":   tcpWorld(t, 2, comm.Options{Timeout: time.Minute, Transport: comm.TransportOptions{Kind: comm.TransportTCP}}),
		"local": local,
	} {
		t.Run(name, func(t *testing.T) {
			onEveryRank(t, w, func(ctx context.Context, c *comm.Comm) error {
				buf, err := comm.AllocShared[float64](ctx, c, 5000)
				if err != nil {
					return err
				}
				if comm.IsShared(c, buf) {
					return errors.New("IsShared on " + name)
				}
				buf[0] = float64(c.Rank() + 1)
				if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
					return err
				}
				if buf[0] != 3 {
					return fmt.Errorf("sum %v, want 3", buf[0])
				}
				return comm.FreeShared(c, buf)
			})
		})
	}
}

// TestAllocSharedOutlivesClose: a shared buffer stays valid memory after
// its communicator is closed, until FreeShared.
func TestAllocSharedOutlivesClose(t *testing.T) {
	w := tcpWorld(t, 2, comm.Options{Timeout: time.Minute, Backend: "native-shm"})
	bufs := make([][]int64, len(w))
	onEveryRank(t, w, func(ctx context.Context, c *comm.Comm) (err error) {
		bufs[c.Rank()], err = comm.AllocShared[int64](ctx, c, 1<<16)
		return err
	})
	closeAll(w)
	for r, c := range w {
		buf := bufs[r]
		for i := range buf {
			buf[i] = int64(i)
		}
		if err := comm.FreeShared(c, buf); err != nil {
			t.Errorf("rank %d: FreeShared after Close: %v", r, err)
		}
	}
}
