package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/object"
)

// The environment of a rank, besides the launcher's variables.
const (
	// RoleEnv names the scenario a process runs as a rank.
	RoleEnv = "GOCOMM_FAULTS_ROLE"
	// ItersEnv: "exit": the collectives to run before exiting.
	ItersEnv = "GOCOMM_FAULTS_ITERS"
	// SeedEnv: "exit": the seed of the sizes (the same on every rank).
	SeedEnv = "GOCOMM_FAULTS_SEED"
	// BadEnv: "local/...": the rank that makes the local error.
	BadEnv = "GOCOMM_FAULTS_BAD"
	// MaxEnv: "loop": how long to loop at most (a Go duration; default 1m).
	MaxEnv = "GOCOMM_FAULTS_MAX"
	// StopEnv: "loop": a path whose creation makes the ranks finish (they
	// agree on it after each sweep of sizes), Close and print done.
	StopEnv = "GOCOMM_FAULTS_STOP"
	// ExiterEnv: "exit": the one rank that exits without Close; the others
	// Close (default: every rank exits without Close).
	ExiterEnv = "GOCOMM_FAULTS_EXITER"
)

// Rank runs this process as one rank of scenario (see the package
// documentation) and returns what made it fail to run the scenario at all;
// an operation failing as the scenario expects is reported on stdout, not
// returned. "exit" exits the process, but on the ranks that Close when
// ExiterEnv is set.
func Rank(ctx context.Context, scenario string) error {
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		return err
	}
	switch {
	case scenario == "loop":
		return loop(ctx, c)
	case scenario == "exit":
		return exitEarly(ctx, c)
	case strings.HasPrefix(scenario, "local/"):
		bad, err := strconv.Atoi(os.Getenv(BadEnv))
		if err != nil {
			return fmt.Errorf("faults: %s=%q: %v", BadEnv, os.Getenv(BadEnv), err)
		}
		run, ok := localCases[strings.TrimPrefix(scenario, "local/")]
		if !ok {
			return fmt.Errorf("faults: unknown scenario %q", scenario)
		}
		start := time.Now()
		err = run(ctx, c, bad)
		if err == nil {
			// This rank's part completed before the abort came (the root
			// of a broadcast sends and is done): the abort must fail its
			// next operation instead, at once.
			err = comm.Barrier(ctx, c)
		}
		if err == nil {
			c.Close()
			return fmt.Errorf("faults: %s: rank %d's local error failed neither the operation nor the next on rank %d", scenario, bad, c.Rank())
		}
		reportFailure(c.Rank(), err, time.Since(start))
		return nil // exit without Close, as a failed program may
	}
	return fmt.Errorf("faults: unknown scenario %q", scenario)
}

// Sizes are the all-reduce sizes in bytes, 8 B to 4 MiB.
func Sizes() []int {
	var s []int
	for n := 8; n <= 4<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}

// allReduce runs one verified all-reduce of n bytes (iteration it): every
// element's sum is exact in float32.
func allReduce(ctx context.Context, c *comm.Comm, n, it int) (wrong string, err error) {
	buf := make([]float32, n/4)
	for j := range buf {
		buf[j] = float32((c.Rank() + 1) * ((j+it)%5 + 1))
	}
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		return "", err
	}
	tri := c.Size() * (c.Size() + 1) / 2
	for j, v := range buf {
		if want := float32(tri * ((j+it)%5 + 1)); v != want {
			return fmt.Sprintf("rank %d: %d bytes, iteration %d: element %d is %v, want %v", c.Rank(), n, it, j, v, want), nil
		}
	}
	return "", nil
}

// broadcast runs one verified broadcast of n bytes from root (iteration
// it).
func broadcast(ctx context.Context, c *comm.Comm, n, it, root int) (wrong string, err error) {
	buf := make([]float32, n/4)
	if c.Rank() == root {
		for j := range buf {
			buf[j] = float32((j+it)%1000 + root)
		}
	}
	if err := comm.Broadcast(ctx, c, buf, root); err != nil {
		return "", err
	}
	for j, v := range buf {
		if want := float32((j+it)%1000 + root); v != want {
			return fmt.Sprintf("rank %d: broadcast of %d bytes from %d, iteration %d: element %d is %v, want %v", c.Rank(), n, root, it, j, v, want), nil
		}
	}
	return "", nil
}

func loop(ctx context.Context, c *comm.Comm) error {
	limit := time.Minute
	if s := os.Getenv(MaxEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("faults: %s: %v", MaxEnv, err)
		}
		limit = d
	}
	deadline := time.Now().Add(limit)
	stop := os.Getenv(StopEnv)
	it := 0
	for round := 0; time.Now().Before(deadline); round++ {
		for _, n := range Sizes() {
			start := time.Now()
			wrong, err := allReduce(ctx, c, n, it)
			if err != nil {
				reportFailure(c.Rank(), err, time.Since(start))
				return nil // exit at once, without Close: the harshest cascade
			}
			if wrong != "" {
				fmt.Printf("wrong %s\n", wrong)
				return nil
			}
			it++
		}
		if round == 0 {
			fmt.Println("ready")
		}
		if stop != "" && stopAgreed(ctx, c, stop) {
			break
		}
	}
	fmt.Printf("done %d\n", it)
	return c.Close()
}

// stopAgreed reports whether any rank has seen the stop file: the ranks
// decide together, so that none closes while another starts a sweep. A
// failure of this collective counts as not stopping: the next sweep
// reports it.
func stopAgreed(ctx context.Context, c *comm.Comm, stop string) bool {
	flag := []int32{0}
	if _, err := os.Stat(stop); err == nil {
		flag[0] = 1
	}
	if err := comm.AllReduce(ctx, c, flag, flag, comm.Max); err != nil {
		return false
	}
	return flag[0] == 1
}

func exitEarly(ctx context.Context, c *comm.Comm) error {
	iters, err := strconv.Atoi(os.Getenv(ItersEnv))
	if err != nil {
		return fmt.Errorf("faults: %s: %v", ItersEnv, err)
	}
	seed, _ := strconv.ParseUint(os.Getenv(SeedEnv), 10, 64)
	exiter := -1
	if s := os.Getenv(ExiterEnv); s != "" {
		if exiter, err = strconv.Atoi(s); err != nil {
			return fmt.Errorf("faults: %s: %v", ExiterEnv, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 13)) // the same sizes on every rank
	sizes := Sizes()
	for it := range iters {
		start := time.Now()
		n := sizes[rng.IntN(len(sizes))]
		var wrong string
		var err error
		if root := rng.IntN(c.Size() + 1); root < c.Size() {
			// A broadcast: its root is done once it has sent, and exits
			// while the others may still be receiving what it sent.
			wrong, err = broadcast(ctx, c, n, it, root)
		} else {
			wrong, err = allReduce(ctx, c, n, it)
		}
		if err != nil {
			reportFailure(c.Rank(), err, time.Since(start))
			os.Exit(1)
		}
		if wrong != "" {
			fmt.Printf("wrong %s\n", wrong)
			os.Exit(1)
		}
	}
	if exiter >= 0 && c.Rank() != exiter {
		if err := c.Close(); err != nil {
			fmt.Printf("closeerr %s\n", strings.ReplaceAll(err.Error(), "\n", " | "))
		}
		fmt.Printf("done %d\n", iters)
		return nil
	}
	fmt.Printf("done %d\n", iters)
	os.Exit(0) // right after the last collective: no Close, no goodbye
	return nil
}

// reportFailure prints the fail line of err.
func reportFailure(self int, err error, took time.Duration) {
	origin, kind, reporter := Blame(err, self)
	fmt.Printf("fail %d %s %d %d %s\n", origin, kind, reporter, took.Milliseconds(), strings.ReplaceAll(err.Error(), "\n", " | "))
}

// Blame is the root cause an operation's error names: the rank that
// failed first, how (a word: lost, timeout, invalid, mismatch, closed,
// error, or object-<stage> for an object collective's *object.Error)
// and the rank that reported it.
func Blame(err error, self int) (origin int, kind string, reporter int) {
	var oe *object.Error
	if errors.As(err, &oe) {
		return oe.Rank, "object-" + strings.ReplaceAll(fmt.Sprint(oe.Stage), " ", "-"), oe.Rank
	}
	o, k, r := core.RootCause(err, self)
	return o, kindWord(k), r
}

func kindWord(k core.FailureKind) string {
	switch k {
	case core.FailLost:
		return "lost"
	case core.FailTimeout:
		return "timeout"
	case core.FailInvalid:
		return "invalid"
	case core.FailMismatch:
		return "mismatch"
	case core.FailClosed:
		return "closed"
	case core.FailError:
		return "error"
	}
	return "unknown"
}
