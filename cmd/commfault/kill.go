package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"time"
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

// localSpecs are the specs of a job of p.ranks ranks on this host over
// transport ("shm" or "tcp").
func localSpecs(p params, transport string, port int, extra ...string) []rankSpec {
	specs := make([]rankSpec, p.ranks)
	for r := range specs {
		specs[r].env = append(worldEnv(r, p.ranks, r, p.ranks, "127.0.0.1", port),
			"GOCOMM_TRANSPORT="+transport, "GOCOMM_SOCKET_HOST=127.0.0.1",
			"GOCOMM_TIMEOUT="+p.timeout.String())
		specs[r].env = append(specs[r].env, extra...)
	}
	return specs
}

// runKillTrial starts a looping job, kills one rank once every rank is
// ready, and watches the survivors fail.
func runKillTrial(ctx context.Context, p params, transport string) killTrial {
	port, err := freePort("127.0.0.1")
	if err != nil {
		return killTrial{setupErr: err}
	}
	j, err := startJob(ctx, localSpecs(p, transport, port))
	if err != nil {
		return killTrial{setupErr: err}
	}
	defer j.kill()
	if _, err := j.awaitReady(p.ready); err != nil {
		return killTrial{setupErr: err}
	}
	time.Sleep(time.Duration(p.rng.Int64N(int64(p.killAfter) + 1)))
	tr := killTrial{victim: p.rng.IntN(p.ranks), survivors: p.ranks - 1}
	killed := time.Now()
	if err := j.cmds[tr.victim].Process.Signal(syscall.SIGKILL); err != nil {
		return killTrial{setupErr: fmt.Errorf("kill rank %d: %w", tr.victim, err)}
	}
	evs, left := j.collect(killed.Add(p.hang), 0)
	failed := map[int]bool{}
	for _, ev := range evs {
		switch {
		case ev.rank == tr.victim:
		case ev.kind == "error" && !failed[ev.rank]:
			failed[ev.rank] = true
			tr.times = append(tr.times, max(ev.at.Sub(killed), 0))
			if namesAny(ev.text, tr.victim) {
				tr.named++
			} else {
				tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d killed; rank %d: %s", tr.victim, ev.rank, ev.text))
			}
		case ev.kind == "wrong":
			tr.wrong++
			tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d: wrong result: %s", ev.rank, ev.text))
		case ev.kind == "exit" && !failed[ev.rank]:
			failed[ev.rank] = true
			tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d killed; rank %d exited with status %d without an error line; stderr: %.300s",
				tr.victim, ev.rank, ev.code, j.stderr[ev.rank].String()))
		}
	}
	for _, r := range left {
		if r != tr.victim {
			tr.hangs++
			tr.misnamed = append(tr.misnamed, fmt.Sprintf("rank %d killed; rank %d still running %v later (hang)", tr.victim, r, p.hang))
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

// runExitJob runs iters verified all-reduces on every rank; a random rank
// exits right after the last one without Close, the others Close.
func runExitJob(ctx context.Context, p params, transport string, iters int) exitJob {
	port, err := freePort("127.0.0.1")
	if err != nil {
		return exitJob{setupErr: err}
	}
	exiter := p.rng.IntN(p.ranks)
	specs := localSpecs(p, transport, port, envMode+"=exit", envIters+"="+strconv.Itoa(iters),
		envExiter+"="+strconv.Itoa(exiter), envSeed+"="+strconv.FormatUint(p.rng.Uint64(), 10))
	j, err := startJob(ctx, specs)
	if err != nil {
		return exitJob{setupErr: err}
	}
	defer j.kill()
	evs, left := j.collect(time.Now().Add(p.ready+p.hang), 0)
	var out exitJob
	for _, ev := range evs {
		switch {
		case ev.kind == "exit" && ev.code == exitInit:
			out.setupErr = fmt.Errorf("rank %d could not start: %s", ev.rank, j.stderr[ev.rank].String())
		case ev.kind == "error" || ev.kind == "wrong":
			out.failed = true
			if out.detail == "" {
				out.detail = fmt.Sprintf("rank %d exited without Close; rank %d: %s %s", exiter, ev.rank, ev.kind, ev.text)
			}
		case ev.kind == "closeerr":
			out.closeErr++
		case ev.kind == "exit" && ev.code != 0 && !out.failed:
			out.failed = true
			out.detail = fmt.Sprintf("rank %d exited with status %d; stderr: %.300s", ev.rank, ev.code, j.stderr[ev.rank].String())
		}
	}
	if len(left) > 0 {
		out.hang, out.failed = true, true
		out.detail = fmt.Sprintf("ranks %v still running after %v", left, p.ready+p.hang)
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
