package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"time"

	"github.com/gocomm/comm/internal/faults"
)

// params are the settings every scenario shares.
type params struct {
	ranks     int
	timeout   time.Duration // GOCOMM_TIMEOUT of the ranks
	hang      time.Duration // a survivor not failed this long after the fault hangs
	ready     time.Duration // bound of start-up
	killAfter time.Duration // kills land uniformly in [0, killAfter) after ready
	rng       *rand.Rand
}

// rankMain runs this process as a rank of scenario (faults.Rank) and
// returns its exit status.
func rankMain(scenario string) int {
	if err := faults.Rank(context.Background(), scenario); err != nil {
		fmt.Fprintf(os.Stderr, "commfault: %s rank %s: %v\n", scenario, os.Getenv("RANK"), err)
		return 1
	}
	return 0
}

// options are the faults options of a job of p.ranks ranks on this host
// over transport ("shm", "tcp", or "" for auto); the ranks are this
// executable.
func options(p params, transport string) (faults.Options, error) {
	self, err := os.Executable()
	if err != nil {
		return faults.Options{}, err
	}
	return faults.Options{
		Ranks:     p.ranks,
		Transport: transport,
		Command:   func(ctx context.Context, _ int) *exec.Cmd { return exec.CommandContext(ctx, self) },
		Wait:      p.ready + p.hang,
	}, nil
}

// localEnv are the variables of every local job's ranks.
func localEnv(p params) []string {
	return []string{"GOCOMM_SOCKET_HOST=127.0.0.1", "GOCOMM_TIMEOUT=" + p.timeout.String()}
}

// killTrial is one kill -9 trial's outcome.
type killTrial struct {
	setupErr  error           // the job never got ready: not a trial
	victim    int             // the rank killed
	named     int             // survivors whose error names the victim
	survivors int             // ranks other than the victim
	hangs     int             // survivors still running at the hang limit
	wrong     int             // wrong results seen
	times     []time.Duration // per survivor that failed: kill to its error
	misnamed  []string        // errors that do not name the victim
}

func (t killTrial) ok() bool {
	return t.setupErr == nil && t.named == t.survivors && t.hangs == 0 && t.wrong == 0
}

// runKillTrial starts a looping job, kills one rank once every rank is
// ready, and watches the survivors fail.
func runKillTrial(ctx context.Context, p params, transport string) killTrial {
	o, err := options(p, transport)
	if err != nil {
		return killTrial{setupErr: err}
	}
	j, err := faults.Start(ctx, o, "loop", append(localEnv(p), faults.MaxEnv+"="+(p.ready+p.hang).String())...)
	if err != nil {
		return killTrial{setupErr: err}
	}
	defer j.Stop()
	if err := j.AwaitReady(p.ready); err != nil {
		return killTrial{setupErr: err}
	}
	time.Sleep(time.Duration(p.rng.Int64N(int64(p.killAfter) + 1)))
	tr := killTrial{victim: p.rng.IntN(p.ranks), survivors: p.ranks - 1}
	killed := j.Kill(tr.victim)
	for _, o := range j.WaitUntil(killed.Add(p.hang)) {
		switch {
		case o.Rank == tr.victim:
		case o.Hung:
			tr.hangs++
			tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d killed; rank %d still running %v later (hang)", tr.victim, o.Rank, p.hang))
		case o.Wrong != "":
			tr.wrong++
			tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d: wrong result: %s", o.Rank, o.Wrong))
		case o.Fail != nil:
			tr.times = append(tr.times, max(o.Fail.At.Sub(killed), 0))
			if namesAny(o.Fail.Text, tr.victim) {
				tr.named++
			} else {
				tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d killed; rank %d: %s", tr.victim, o.Rank, o.Fail.Text))
			}
		default:
			tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d killed; rank %d ended (%v) without a fail line: %.300s",
				tr.victim, o.Rank, o.Exit, o.Output))
		}
	}
	return tr
}

// exitJob is one exit-without-Close job's outcome.
type exitJob struct {
	setupErr error
	failed   bool
	hang     bool
	closeErr int
	detail   string
}

// runExitJob runs iters verified collectives on every rank; a random rank
// exits right after the last one without Close, the others Close.
func runExitJob(ctx context.Context, p params, transport string, iters int) exitJob {
	o, err := options(p, transport)
	if err != nil {
		return exitJob{setupErr: err}
	}
	exiter := p.rng.IntN(p.ranks)
	outs, err := faults.RunExitJob(ctx, o, iters, p.rng.Uint64(), exiter, localEnv(p)...)
	if err != nil {
		return exitJob{setupErr: err}
	}
	var out exitJob
	for _, o := range outs {
		if o.CloseErr != "" {
			out.closeErr++
		}
		if o.Hung {
			out.hang = true
		}
		if o.Done && o.Exit == nil && o.Fail == nil && o.Wrong == "" {
			continue
		}
		if !out.failed {
			out.detail = fmt.Sprintf("rank %d exited without Close; rank %d: done %v, exit %v, hung %v: %.300s", exiter, o.Rank, o.Done, o.Exit, o.Hung, o.Output)
		}
		out.failed = true
	}
	return out
}

// stopFile is a fresh path whose creation tells looping ranks to finish.
func stopFile() (string, error) {
	f, err := os.CreateTemp("", "commfault-stop-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	f.Close()
	return name, os.Remove(name)
}
