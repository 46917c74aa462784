package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/gocomm/comm"
)

// RandomProgram returns a case that runs a program of steps collectives
// drawn from seed over several communicators at once: the world it is given,
// the two halves of a Split (even and odd ranks, in reverse order), and a
// NewGroup of every rank but the last, reversed. Each step picks a
// communicator, a collective of any kind, a count (mostly small, sometimes
// around or above the cost model's thresholds), a root, and whether it runs
// blocking or is started and waited for later, with up to four in flight at
// once; every result is checked against the naive reference when it is
// waited for. Every rank draws the same program from seed, so ranks agree on
// each call's arguments while running the calls of different communicators
// interleaved.
//
// Run it on the world communicator of every rank (RunLocal, or one call per
// process).
func RandomProgram(seed uint64, steps int) Case {
	return Case{fmt.Sprintf("RandomProgram/seed=%d/steps=%d", seed, steps), func(ctx context.Context, world *comm.Comm) error {
		return runProgram(ctx, world, seed, steps, 0)
	}}
}

// RandomProgramUpTo is RandomProgram with every count at most maxCount
// elements: a larger draw is taken modulo maxCount+1, so that the ranks
// still draw one program and the rest of it is RandomProgram's. Fuzzing
// uses it, where every program must be short.
func RandomProgramUpTo(seed uint64, steps, maxCount int) Case {
	return Case{fmt.Sprintf("RandomProgram/seed=%d/steps=%d/max=%d", seed, steps, maxCount), func(ctx context.Context, world *comm.Comm) error {
		return runProgram(ctx, world, seed, steps, max(maxCount, 0)+1)
	}}
}

type pending struct {
	step   int
	spec   opSpec
	w      *comm.Work
	verify func() error
}

// runProgram runs the program; with bound > 0 every count is taken modulo
// bound.
func runProgram(ctx context.Context, world *comm.Comm, seed uint64, steps, bound int) (err error) {
	size, me := world.Size(), world.Rank()
	half, err := world.Split(ctx, me%2, -me)
	if err != nil {
		return fmt.Errorf("splitting the world: %w", err)
	}
	defer half.Close()
	members := make([]int, 0, size)
	for r := size - 2; r >= 0; r-- {
		members = append(members, r)
	}
	if size == 1 {
		members = []int{0}
	}
	group, err := world.NewGroup(ctx, members)
	if err != nil {
		return fmt.Errorf("making the group of ranks %v: %w", members, err)
	}
	defer group.Close()
	comms := []*comm.Comm{world, half, group}
	names := []string{"world", "half", "group"}

	var inFlight []pending
	finish := func(p pending) error {
		if err := p.w.Wait(); err != nil {
			return fmt.Errorf("step %d (%v, started): %w", p.step, p.spec, err)
		}
		if err := p.verify(); err != nil {
			return fmt.Errorf("step %d (%v, started): %w", p.step, p.spec, err)
		}
		return nil
	}
	defer func() {
		// On failure, still wait for what is in flight so that no buffer
		// is in use when the case returns; the first error wins.
		for _, p := range inFlight {
			err = errors.Join(err, finish(p))
		}
	}()

	rng := rand.New(rand.NewPCG(seed, 0x676f636f6d6d))
	for step := range steps {
		// Draw every parameter before looking at membership, so that all
		// ranks stay on the same random stream.
		ci := rng.IntN(len(comms))
		kind := opKind(rng.IntN(int(numOpKinds)))
		n := randomCount(rng)
		if bound > 0 {
			n %= bound
		}
		rootDraw := rng.IntN(1 << 20)
		full := rng.IntN(2) == 0
		op := []comm.ReduceOp{comm.Sum, comm.Max, comm.Min}[rng.IntN(3)]
		async := rng.IntN(2) == 0
		waitSome := rng.IntN(3) == 0

		c := comms[ci]
		if c.IsMember() {
			spec := opSpec{kind: kind, n: n, op: op, root: rootDraw % c.Size(), full: full, salt: step}
			w, verify := startOp[int32](ctx, c, spec)
			p := pending{step, spec, w, verify}
			if async && len(inFlight) < 4 {
				inFlight = append(inFlight, p)
			} else if err := finish(p); err != nil {
				return fmt.Errorf("on %s: %w", names[ci], err)
			}
		}
		if waitSome && len(inFlight) > 0 {
			// Wait for a random one, not the oldest: completion order need
			// not follow start order.
			i := rootDraw % len(inFlight)
			p := inFlight[i]
			inFlight = append(inFlight[:i], inFlight[i+1:]...)
			if err := finish(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// randomCount is mostly small (latency paths), sometimes mid-size, and now
// and then just around a threshold of the cost model (in int32 elements).
func randomCount(rng *rand.Rand) int {
	switch x := rng.IntN(10); {
	case x < 6:
		return rng.IntN(40)
	case x < 9:
		return rng.IntN(20000)
	default:
		t := Thresholds[rng.IntN(len(Thresholds))] / 4
		return t - 2 + rng.IntN(5)
	}
}
