package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gocomm/comm/internal/faults"
	"github.com/gocomm/comm/internal/netns"
)

// partitionResult is the partition scenario's outcome.
type partitionResult struct {
	setupErr error
	ranks    int
	named    int             // ranks whose error names a rank across the partition
	inTime   int             // ranks that failed within the timeout (+ slack) of their operation's start, or of the cut if later
	hangs    int             // ranks still running at the hang limit
	times    []time.Duration // partition to each rank's error
	detail   []string
}

// partitionSlack is what a rank may take past GOCOMM_TIMEOUT to report:
// the exchange of flight recorders after a timeout waits a fortieth of
// the timeout (at least 200 ms) for ranks that do not answer, here those
// beyond the partition.
const partitionSlack = 500 * time.Millisecond

// runPartition starts 2+2 ranks on two simulated hosts, takes the second
// host's link down once they are ready, and watches every rank fail.
func runPartition(ctx context.Context, p params) partitionResult {
	if err := netns.Available(); err != nil {
		return partitionResult{setupErr: err}
	}
	nw, err := netns.New(netns.Options{Hosts: 2})
	if err != nil {
		return partitionResult{setupErr: err}
	}
	defer nw.Close()
	hosts := nw.Hosts()
	const perHost = 2
	size := perHost * len(hosts)
	port := 29500 + p.rng.IntN(20000) // a fresh namespace: every port is free
	hostOf := make([]int, size)
	for r := range hostOf {
		hostOf[r] = hosts[r/perHost].Index
	}
	o, err := options(p, "")
	if err != nil {
		return partitionResult{setupErr: err}
	}
	o.Ranks = size
	self := ""
	if self, err = os.Executable(); err != nil {
		return partitionResult{setupErr: err}
	}
	o.Command = func(ctx context.Context, r int) *exec.Cmd { return hosts[r/perHost].Command(ctx, self) }
	o.RankEnv = func(r int) []string {
		h := hosts[r/perHost]
		return []string{"LOCAL_RANK=" + strconv.Itoa(r%perHost), "LOCAL_WORLD_SIZE=" + strconv.Itoa(perHost),
			"MASTER_ADDR=" + hosts[0].Addr, "MASTER_PORT=" + strconv.Itoa(port),
			"GOCOMM_SOCKET_HOST=" + h.Addr, "GOCOMM_HOST_ID=commfault-" + strconv.Itoa(h.Index),
			"GOCOMM_TIMEOUT=" + p.timeout.String()}
	}
	j, err := faults.Start(ctx, o, "loop", faults.MaxEnv+"="+(p.ready+p.timeout+p.hang).String())
	if err != nil {
		return partitionResult{setupErr: err}
	}
	defer j.Stop()
	if err := j.AwaitReady(p.ready); err != nil {
		return partitionResult{setupErr: err}
	}
	cut := time.Now()
	if err := hosts[1].SetLink(false); err != nil {
		return partitionResult{setupErr: fmt.Errorf("taking host 1's link down: %w", err)}
	}
	res := partitionResult{ranks: size}
	for _, o := range j.WaitUntil(cut.Add(p.timeout + p.hang)) {
		if o.Hung {
			res.hangs++
			res.detail = append(res.detail, fmt.Sprintf("rank %d still running %v after the partition", o.Rank, p.timeout+p.hang))
			continue
		}
		var across []int
		for q := range size {
			if hostOf[q] != hostOf[o.Rank] {
				across = append(across, q)
			}
		}
		at, kind, text, began := o.Exited, "exit", fmt.Sprintf("%v without a fail line: %.300s", o.Exit, o.Output), time.Time{}
		switch {
		case o.Fail != nil:
			at, kind, text, began = o.Fail.At, "error", o.Fail.Text, o.Fail.At.Add(-o.Fail.Took)
		case o.Wrong != "":
			kind, text = "wrong", o.Wrong
		}
		d := max(at.Sub(cut), 0)
		res.times = append(res.times, d)
		var problems []string
		// The timeout bounds each operation: one that began after the
		// cut (the one in flight then completed, its messages already
		// sent) may run until its own timeout.
		from, beganNote := cut, ""
		if began.After(cut) {
			from, beganNote = began, fmt.Sprintf(", its all-reduce began %v after the cut", began.Sub(cut).Round(time.Millisecond))
		}
		if at.Sub(from) <= p.timeout+partitionSlack {
			res.inTime++
		} else {
			problems = append(problems, "late")
		}
		if kind == "error" && namesAny(text, across...) {
			res.named++
		} else {
			problems = append(problems, "names no rank across the partition")
		}
		// Every rank's line: what each one said, and when, is the figure.
		note := ""
		if len(problems) > 0 {
			note = " (" + strings.Join(problems, ", ") + ")"
		}
		res.detail = append(res.detail, fmt.Sprintf("rank %d (host %d) after %v%s%s: %s %s", o.Rank, hostOf[o.Rank], d.Round(time.Millisecond), beganNote, note, kind, text))
	}
	return res
}
