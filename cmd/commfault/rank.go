package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gocomm/comm"
)

// The rank program's environment (besides the launcher's variables).
const (
	envRole   = "COMMFAULT_ROLE"   // "rank" makes the process a rank
	envMode   = "COMMFAULT_MODE"   // loop or exit
	envStop   = "COMMFAULT_STOP"   // loop: finish once this file exists
	envIters  = "COMMFAULT_ITERS"  // exit: collectives to run
	envExiter = "COMMFAULT_EXITER" // exit: the rank that exits without Close
	envSeed   = "COMMFAULT_SEED"   // exit: sizes
)

// Exit statuses of a rank.
const (
	exitOK    = 0
	exitInit  = 2
	exitError = 3
	exitWrong = 4
)

// Lines a rank prints on stdout, one per event:
//
//	ready                   after its first sweep of sizes
//	error <unixnano> [began=<unixnano>] <text>
//	                        a collective (or Init) failed; began is when
//	                        the failed collective was called
//	wrong <text>            a result was wrong
//	done <iterations>       it finished (loop: stop file; exit: ITERS)
//	closeerr <text>         Close returned an error
func report(kind, text string) {
	fmt.Printf("%s %s\n", kind, strings.ReplaceAll(text, "\n", " | "))
}

// sweepSizes are the all-reduce sizes in bytes: 8 B to 4 MiB.
func sweepSizes() []int {
	var s []int
	for n := 8; n <= 4<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}

// fill sets buf to rank's contribution for iteration it; expect is the sum
// over size ranks. Exact in float32.
func fill(buf []float32, rank, it int) {
	for j := range buf {
		buf[j] = float32((rank + 1) * ((j+it)%5 + 1))
	}
}

func check(buf []float32, size, it int) error {
	tri := size * (size + 1) / 2
	for j, v := range buf {
		if want := float32(tri * ((j+it)%5 + 1)); v != want {
			return fmt.Errorf("element %d of %d is %v, want %v (iteration %d)", j, len(buf), v, want, it)
		}
	}
	return nil
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

// rankMain is a rank: it runs the mode in the environment and exits.
func rankMain() int {
	ctx := context.Background()
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		report("error", fmt.Sprintf("%d %v", time.Now().UnixNano(), err))
		return exitInit
	}
	allReduce := func(n, it int) int {
		buf := make([]float32, n/4)
		fill(buf, c.Rank(), it)
		began := time.Now()
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			report("error", fmt.Sprintf("%d began=%d %v", time.Now().UnixNano(), began.UnixNano(), err))
			return exitError
		}
		if err := check(buf, c.Size(), it); err != nil {
			report("wrong", fmt.Sprintf("rank %d: %d bytes: %v", c.Rank(), n, err))
			return exitWrong
		}
		return exitOK
	}
	it := 0
	switch os.Getenv(envMode) {
	case "exit":
		iters, _ := strconv.Atoi(os.Getenv(envIters))
		exiter, _ := strconv.Atoi(os.Getenv(envExiter))
		seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
		rng := rand.New(rand.NewPCG(seed, 1)) // the same sizes on every rank
		sizes := sweepSizes()
		for ; it < iters; it++ {
			if st := allReduce(sizes[rng.IntN(len(sizes))], it); st != exitOK {
				return st
			}
		}
		if c.Rank() == exiter {
			report("done", strconv.Itoa(it))
			os.Exit(exitOK) // right after the last collective, no Close
		}
	default: // loop
		stop := os.Getenv(envStop)
		for {
			for _, n := range sweepSizes() {
				if st := allReduce(n, it); st != exitOK {
					return st
				}
				it++
			}
			if it == len(sweepSizes()) {
				report("ready", "")
			}
			if stop != "" && stopAgreed(ctx, c, stop) {
				break
			}
		}
	}
	if err := c.Close(); err != nil {
		report("closeerr", err.Error())
	}
	report("done", strconv.Itoa(it))
	return exitOK
}
