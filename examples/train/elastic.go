package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/elastic"
	"github.com/gocomm/comm/profile"
)

// trainElastic is -elastic: the training goes on through the loss of ranks
// and grows back when processes join (commrun --elastic restarts a killed
// rank's process, whose comm.Init joins the running world). It runs under
// elastic.Run: the parameters, the momentum and the global batch size are
// the elastic.State, and the position in the training is its step count.
//
// A step is a fixed global batch of the epoch's permutation (the batch
// size times the world size the job started with), which the ranks of the
// world of the moment share, rank r taking every size-th sample from r:
// the same samples in the same order whatever the world's size, so a run
// that changed size trains on what an undisturbed run trains on. At 4 ranks
// of a 4-rank job the split is that of the other modes, sample for sample.
//
// It returns the communicator it ended on (c, or the world that replaced
// it); the caller closes it.
func trainElastic(ctx context.Context, c *comm.Comm, cfg config, out io.Writer) (result, *comm.Comm, error) {
	if err := cfg.check(); err != nil {
		return result{}, c, err
	}
	trainSet, testSet := makeData(cfg.seed, cfg.samples)
	joined := os.Getenv("GOCOMM_JOIN") == "1"
	// Which process is which rank, for whoever wants to kill one.
	fmt.Fprintf(out, "train: rank %d is pid %d\n", c.Rank(), os.Getpid())

	m := newModel(cfg.hidden, cfg.layers)
	if c.Rank() == 0 && !joined {
		m.init(cfg.seed)
	}
	velocity := make([]float32, len(m.params))
	// The global batch travels with the state so that a newcomer learns
	// it; a float32 holds it exactly.
	job := []float32{float32(cfg.batch * c.Size())}
	st := elastic.NewState(m.params, velocity, job)

	var (
		opt     stepper
		grads   gradients
		held    *deferredReady
		boundTo *comm.Comm
	)
	// bind builds the optimizer (and its ddp.Reducer) over c: a Reducer
	// is bound to its communicator. It is collective.
	bind := func(ctx context.Context, c *comm.Comm) error {
		o, err := newStepperOver(ctx, c, cfg, m, velocity)
		if err != nil {
			return err
		}
		opt, grads, held, boundTo = o, o.grads(), nil, c
		if !cfg.overlap {
			held = &deferredReady{gradients: grads}
			grads = held
		}
		return nil
	}

	if c.Rank() == 0 && !joined {
		launcher := "none"
		if env, err := comm.ReadEnvironment(nil); err == nil {
			launcher = env.Launcher.String()
		}
		fmt.Fprintf(out, "train: %d ranks (launcher: %s), elastic, %d parameters (%s of gradient), %s, %s, %d training samples, %d steps of %d per epoch\n",
			c.Size(), launcher, len(m.params), profile.ConvertSize(int64(4*len(m.params))), cfg.optimizerString(), cfg.gradientString(), trainSet.len(), trainSet.len()/int(job[0]), int(job[0]))
	}

	batchX := make([]float32, int(job[0])*features)
	batchY := make([]int, int(job[0]))
	var (
		res                    result
		lossSum, correct, seen float64
		perm                   []int
		permEpoch              int
		changed                bool      // the world changed since the last step
		finalSince             time.Time // when rank 0 reached the end with fewer ranks than the job's
		start                  = time.Now()
		trained                int64 // steps this process took part in
		stepTime               time.Duration
	)
	prevSize := c.Size()
	onChange := func(ctx context.Context, nc *comm.Comm) error {
		if nc.Rank() == 0 {
			fmt.Fprintf(out, "train: elastic: %d ranks (were %d) go on from step %d, unix ms %d\n", nc.Size(), prevSize, st.Step, time.Now().UnixMilli())
			if perEpoch := trainSet.len() / int(job[0]); nc.Size() < prevSize && perEpoch > 0 {
				fmt.Fprintf(out, "train: survived: %d ranks go on from epoch %d step %d\n", nc.Size(), int(st.Step)/perEpoch+1, int(st.Step)%perEpoch)
			}
		}
		prevSize, changed = nc.Size(), true
		finalSince = time.Time{}
		return bind(ctx, nc)
	}

	step := func(ctx context.Context, c *comm.Comm) (bool, error) {
		if boundTo != c {
			// A newcomer's first step, or the first world's.
			if err := bind(ctx, c); err != nil {
				return false, err
			}
		}
		global := int(job[0])
		if global*features > len(batchX) {
			batchX, batchY = make([]float32, global*features), make([]int, global)
		}
		perEpoch := trainSet.len() / global
		if perEpoch == 0 {
			return false, fmt.Errorf("%d samples leave fewer than one global batch of %d: use more -samples or a smaller -batch", trainSet.len(), global)
		}
		rank, size := c.Rank(), c.Size()
		if st.Step >= int64(perEpoch*cfg.epochs) {
			return finalStep(ctx, c, cfg, global/cfg.batch, &finalSince, m, testSet, &res)
		}
		epoch, s := int(st.Step)/perEpoch+1, int(st.Step)%perEpoch
		if perm == nil || permEpoch != epoch {
			// The permutation of the other modes' shards (makeShard).
			perm, permEpoch = epochPerm(cfg.seed, epoch, trainSet.len()), epoch
		}
		k := 0
		for j := rank; j < global; j += size {
			i := perm[s*global+j]
			copy(batchX[k*features:(k+1)*features], trainSet.x[i*features:(i+1)*features])
			batchY[k] = trainSet.y[i]
			k++
		}
		t0 := time.Now()
		m.forward(batchX[:k*features], k)
		l, ok := m.score(batchY[:k])
		gctx := comm.WithLogName(ctx, opt.logName())
		// Scaled so that the ranks' average is the global batch's mean
		// gradient, however unevenly it is shared.
		err := m.backward(gctx, batchY[:k], float32(size)/float32(global), grads)
		if err == nil && held != nil {
			err = held.flush(gctx)
		}
		if err == nil {
			_, _, err = opt.step(ctx)
		}
		if err != nil {
			return false, fmt.Errorf("step %d (epoch %d step %d) on %d ranks: %w", st.Step, epoch, s, size, err)
		}
		if s == perEpoch-1 {
			sums := []float64{lossSum + l, correct + float64(ok), seen + float64(k)}
			if err := comm.AllReduce(comm.WithLogName(ctx, "all_reduce(sum) stats"), c, sums, sums, comm.Sum); err != nil {
				return false, fmt.Errorf("epoch %d: metrics all-reduce: %w", epoch, err)
			}
			res.loss = sums[0] / sums[2]
			if rank == 0 {
				// After a change, the samples of the ranks that left
				// are not counted.
				fmt.Fprintf(out, "epoch %d/%d: loss %.4f  accuracy %.2f%%  (%d ranks, %.0f samples counted)\n", epoch, cfg.epochs, res.loss, 100*sums[1]/sums[2], size, sums[2])
			}
			lossSum, correct, seen = 0, 0, 0
		} else {
			lossSum, correct, seen = lossSum+l, correct+float64(ok), seen+float64(k)
		}
		stepTime += time.Since(t0)
		trained++
		st.Step++
		if rank == 0 {
			if changed {
				fmt.Fprintf(out, "train: elastic: %d ranks stepping at step %d, unix ms %d\n", size, st.Step, time.Now().UnixMilli())
			}
			if cfg.logSteps {
				fmt.Fprintf(out, "train: step %d/%d on %d ranks, unix ms %d\n", st.Step, perEpoch*cfg.epochs, size, time.Now().UnixMilli())
			}
		}
		changed = false
		if elapsed := time.Since(start); elapsed > 0 {
			res.samplesPerSec = float64(trained) * float64(global) / elapsed.Seconds()
		}
		return false, nil
	}

	logged := func(ctx context.Context, c *comm.Comm) (bool, error) {
		done, err := step(ctx, c)
		if err != nil {
			fmt.Fprintf(out, "train: rank %d of %d: %v (unix ms %d)\n", c.Rank(), c.Size(), err, time.Now().UnixMilli())
		}
		return done, err
	}
	end, err := elastic.Run(ctx, c, st, elastic.Options{OnChange: onChange}, logged)
	if err != nil {
		return res, end, err
	}
	say := func(format string, args ...any) {
		if end.Rank() == 0 {
			fmt.Fprintf(out, format+"\n", args...)
		}
	}
	say("parameters identical on all %d ranks", end.Size())
	if trained > 0 {
		res.stepTime = stepTime / time.Duration(trained)
		say("train: %.2f ms per step on rank 0 (forward, backward and optimizer step); %s", ms(res.stepTime), cfg.gradientString())
	}
	if err := end.Profiler().LogSummary(ctx, out, true); err != nil {
		return res, end, fmt.Errorf("comms summary: %w", err)
	}
	say("train: done: %d ranks, %d epochs, loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f samples/s, parameter checksum %016x",
		end.Size(), cfg.epochs, res.loss, res.testLoss, 100*res.accuracy, res.samplesPerSec, res.checksum)
	return res, end, nil
}

// errDiverged marks a final check that no recovery changes (ranks whose
// parameters differ): elastic.Run must not treat it as a lost rank.
var errDiverged = errors.New("train: the ranks diverged")

// finalStep is -elastic's last call of the step function, once every
// training step is done: while the world is smaller than the job's size
// (jobSize) it waits, up to -join-wait, for replacements to join (Run
// grows the world between two calls), then it evaluates. Rank 0 decides,
// so that every rank takes the same branch.
func finalStep(ctx context.Context, c *comm.Comm, cfg config, jobSize int, since *time.Time, m *model, testSet dataset, res *result) (bool, error) {
	evaluateNow := []int64{1}
	if c.Rank() == 0 && c.Size() < jobSize {
		if since.IsZero() {
			*since = time.Now()
		}
		if time.Since(*since) < cfg.joinWait {
			evaluateNow[0] = 0
		}
	}
	if err := comm.Broadcast(ctx, c, evaluateNow, 0); err != nil {
		return false, fmt.Errorf("deciding to evaluate: %w", err)
	}
	if evaluateNow[0] == 0 {
		time.Sleep(50 * time.Millisecond) // Run looks for newcomers between two calls
		return false, nil
	}
	err, fatal := evaluate(ctx, c, m, testSet, cfg.batch, res)
	if fatal != nil {
		return false, fmt.Errorf("%w: %v", errDiverged, fatal)
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
