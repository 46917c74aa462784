//go:build mpi && cgo

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend/mpi"
	"github.com/gocomm/comm/ddp"
	"github.com/gocomm/comm/internal/testkit"
)

// Package ddp's Reducer over the MPI backend: buckets reduced as their
// gradients arrive in a random order per rank, checked against a
// per-tensor all-reduce, a mismatched registration failing every rank,
// and a rank with an unused gradient failing every rank at once.
//
// ddpEnv names the role of these ranks; init runs them (see onebitEnv).
const ddpEnv = "GOCOMM_MPI_DDP_CHILD"

func init() {
	if os.Getenv(ddpEnv) != "" {
		os.Exit(testkit.Status("ddp rank "+os.Getenv("OMPI_COMM_WORLD_RANK"), childDDP()))
	}
}

// TestDDP runs the Reducer on 2 and 3 ranks; then the unused gradient, on
// 3 ranks with GOCOMM_MPI_BLOCKING_MAX=none. On the default blocking path
// a rank aborted while inside a blocking MPI call that the failing rank
// never joins cannot leave it: the backend's watchdog ends the job with
// MPI_Abort 10 seconds later, printing the reason (the gradients named).
func TestDDP(t *testing.T) {
	for _, run := range []struct {
		np  int
		env []string
	}{
		{2, []string{ddpEnv + "=1"}},
		{3, []string{ddpEnv + "=1"}},
		{3, []string{ddpEnv + "=unused", "GOCOMM_MPI_BLOCKING_MAX=none"}},
	} {
		out, err := runMPI(t, run.np, 4*time.Minute, run.env, os.Args[0], "-test.run=^$")
		if err != nil {
			t.Fatalf("np=%d %v: %v\n%s", run.np, run.env, err, tail(out, 30))
		}
		if n := strings.Count(out, "ddp: ok"); n != run.np {
			t.Fatalf("np=%d %v: %d ranks reported their checks, want %d:\n%s", run.np, run.env, n, run.np, tail(out, 30))
		}
	}
}

// ddpShapes split into several buckets under ddpCaps.
var (
	ddpShapes = [][]int{{4, 3}, {5}, {}, {0, 7}, {40}, {2, 2, 2}, {9}, {3, 1}, {70}, {6}}
	ddpCaps   = ddp.Options{FirstBucketCapBytes: 48, BucketCapBytes: 100}
)

func childDDP() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := initMPI(ctx, mpi.Name, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := ddp.New[float32](ctx, c, ddpShapes, ddpCaps)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(c.Rank()), 1))
	value := func(rank, step, i, j int) float32 { return float32((rank*7+step*3+i*5+j)%9 - 4) }
	for step := range 4 {
		for _, i := range rng.Perm(r.Len()) {
			g := r.Grad(i)
			for j := range g {
				g[j] = value(c.Rank(), step, i, j)
			}
			if err := r.Ready(ctx, i); err != nil {
				return err
			}
		}
		if err := r.Wait(ctx); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		for i := range r.Len() {
			want := make([]float32, len(r.Grad(i)))
			for j := range want {
				want[j] = value(c.Rank(), step, i, j)
			}
			if err := comm.AllReduce(ctx, c, want, want, comm.Avg); err != nil {
				return err
			}
			if !slices.Equal(r.Grad(i), want) {
				return fmt.Errorf("step %d, gradient %d: got %v, want %v", step, i, r.Grad(i), want)
			}
		}
	}

	// A registration that differs on the last rank fails every rank.
	shapes := ddpShapes
	if c.Rank() == c.Size()-1 {
		shapes = append(slices.Clone(ddpShapes), []int{3})
	}
	if _, err := ddp.New[float32](ctx, c, shapes, ddp.Options{}); !errors.Is(err, ddp.ErrMismatch) || !strings.Contains(err.Error(), "gradient 10") {
		return fmt.Errorf("mismatched registration: %v, want ddp.ErrMismatch naming gradient 10", err)
	}

	if os.Getenv(ddpEnv) != "unused" {
		fmt.Printf("ddp: ok (rank %d of %d)\n", c.Rank(), c.Size())
		return nil
	}
	// An unused gradient on rank 1 fails every rank, promptly (this aborts
	// the world: last).
	start := time.Now()
	for i := range r.Len() {
		if c.Rank() == 1 && i == 4 {
			continue
		}
		if err := r.Ready(ctx, i); err != nil {
			return err
		}
	}
	err = r.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "4 [40]") || !strings.Contains(err.Error(), ddp.ErrUnused.Error()) {
		return fmt.Errorf("unused gradient 4 on rank 1: rank %d got %v", c.Rank(), err)
	}
	if d := time.Since(start); d > 20*time.Second {
		return fmt.Errorf("unused gradient 4 on rank 1: rank %d failed after %v", c.Rank(), d)
	}
	fmt.Printf("ddp: ok (rank %d of %d)\n", c.Rank(), c.Size())
	return nil
}
