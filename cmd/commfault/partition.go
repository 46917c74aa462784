package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"os/exec"

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
	specs := make([]rankSpec, size)
	hostOf := make([]int, size)
	for r := range specs {
		h := hosts[r/perHost]
		hostOf[r] = h.Index
		specs[r] = rankSpec{
			command: func(ctx context.Context, name string, args ...string) *exec.Cmd { return h.Command(ctx, name, args...) },
			env: append(worldEnv(r, size, r%perHost, perHost, hosts[0].Addr, port),
				"GOCOMM_SOCKET_HOST="+h.Addr, "GOCOMM_HOST_ID=commfault-"+strconv.Itoa(h.Index),
				"GOCOMM_TIMEOUT="+p.timeout.String()),
		}
	}
	j, err := startJob(ctx, specs)
	if err != nil {
		return partitionResult{setupErr: err}
	}
	defer j.kill()
	if _, err := j.awaitReady(p.ready); err != nil {
		return partitionResult{setupErr: err}
	}
	cut := time.Now()
	if err := hosts[1].SetLink(false); err != nil {
		return partitionResult{setupErr: fmt.Errorf("taking host 1's link down: %w", err)}
	}
	res := partitionResult{ranks: size}
	evs, left := j.collect(cut.Add(p.timeout+p.hang), 0)
	failed := map[int]bool{}
	for _, ev := range evs {
		if failed[ev.rank] || (ev.kind != "error" && ev.kind != "exit" && ev.kind != "wrong") {
			continue
		}
		failed[ev.rank] = true
		var across []int
		for q := range size {
			if hostOf[q] != hostOf[ev.rank] {
				across = append(across, q)
			}
		}
		d := max(ev.at.Sub(cut), 0)
		res.times = append(res.times, d)
		var faults []string
		// The timeout bounds each operation: one that began after the
		// cut (the one in flight then completed, its messages already
		// sent) may run until its own timeout.
		from, began := cut, ""
		if ev.began.After(cut) {
			from, began = ev.began, fmt.Sprintf(", its all-reduce began %v after the cut", ev.began.Sub(cut).Round(time.Millisecond))
		}
		if ev.at.Sub(from) <= p.timeout+partitionSlack {
			res.inTime++
		} else {
			faults = append(faults, "late")
		}
		if ev.kind == "error" && namesAny(ev.text, across...) {
			res.named++
		} else {
			faults = append(faults, "names no rank across the partition")
		}
		// Every rank's line: what each one said, and when, is the figure.
		note := ""
		if len(faults) > 0 {
			note = " (" + strings.Join(faults, ", ") + ")"
		}
		res.detail = append(res.detail, fmt.Sprintf("rank %d (host %d) after %v%s%s: %s %s", ev.rank, hostOf[ev.rank], d.Round(time.Millisecond), began, note, ev.kind, ev.text))
	}
	res.hangs = len(left)
	for _, r := range left {
		res.detail = append(res.detail, fmt.Sprintf("rank %d still running %v after the partition", r, p.timeout+p.hang))
	}
	return res
}
