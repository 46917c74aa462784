package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// table collects one row per scenario and the errors behind them.
type table struct {
	rows    [][6]string
	notes   []string
	samples int
}

func (t *table) add(row [6]string, samples []string) {
	t.rows = append(t.rows, row)
	for i, s := range samples {
		if i == t.samples {
			t.notes = append(t.notes, fmt.Sprintf("- (%s, %s: %d more)", row[0], row[1], len(samples)-i))
			break
		}
		t.notes = append(t.notes, fmt.Sprintf("- %s, %s: %.400s", row[0], row[1], s))
	}
}

func (t *table) write(w io.Writer) {
	fmt.Fprintln(w, "| scenario | transport | runs | outcome | hangs | time to fail p50 / p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r[:], " | "))
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w, "\nErrors behind the figures (samples):")
		fmt.Fprintln(w)
		for _, n := range t.notes {
			fmt.Fprintln(w, n)
		}
	}
}

func p50p99(ds []time.Duration) string {
	return ms(percentile(ds, 50), len(ds) > 0) + " / " + ms(percentile(ds, 99), len(ds) > 0)
}

// kills runs the kill trials over transport; false if none could start.
func (t *table) kills(ctx context.Context, c config, transport string) bool {
	var good, setup, hangs, named, survivors, wrong int
	var times []time.Duration
	var notes []string
	for i := range c.kills {
		tr := runKillTrial(ctx, c.p, transport)
		if tr.setupErr != nil {
			setup++
			notes = append(notes, fmt.Sprintf("trial %d did not start: %v", i, tr.setupErr))
			continue
		}
		if tr.ok() {
			good++
		}
		hangs += tr.hangs
		named += tr.named
		survivors += tr.survivors
		wrong += tr.wrong
		times = append(times, tr.times...)
		notes = append(notes, tr.misnamed...)
	}
	ran := c.kills - setup
	outcome := fmt.Sprintf("%d/%d trials: every survivor named the killed rank (%d/%d survivors); %d wrong results", good, ran, named, survivors, wrong)
	if setup > 0 {
		outcome += fmt.Sprintf("; %d trials did not start", setup)
	}
	t.add([6]string{"kill -9 one rank at a random moment", transport, fmt.Sprint(c.kills), outcome, fmt.Sprint(hangs), p50p99(times)}, notes)
	return ran > 0
}

// exits runs the exit-without-Close jobs over transport.
func (t *table) exits(ctx context.Context, c config, transport string) bool {
	var failed, hangs, setup, closeErrs int
	var notes []string
	for i := range c.exits {
		j := runExitJob(ctx, c.p, transport, c.exitIters)
		switch {
		case j.setupErr != nil:
			setup++
			notes = append(notes, fmt.Sprintf("job %d did not start: %v", i, j.setupErr))
			continue
		case j.failed:
			failed++
			notes = append(notes, j.detail)
		}
		if j.hang {
			hangs++
		}
		closeErrs += j.closeErr
	}
	ran := c.exits - setup
	outcome := fmt.Sprintf("%d/%d jobs failed (%d verified all-reduces and broadcasts per rank, then one rank exits without Close); %d Close errors on the others", failed, ran, c.exitIters, closeErrs)
	if setup > 0 {
		outcome += fmt.Sprintf("; %d jobs did not start", setup)
	}
	t.add([6]string{"exit right after the last collective, no Close", transport, fmt.Sprint(c.exits), outcome, fmt.Sprint(hangs), "-"}, notes)
	return ran > 0
}

func (t *table) storm(ctx context.Context, c config) bool {
	r := runStorm(ctx, c.p, c.storm, c.hold)
	row := [6]string{fmt.Sprintf("%d hostile connections (garbage, huge lengths, half-open, slow drip) at a job's ports, GOCOMM_SECRET set", c.storm), "tcp", "1 job"}
	if r.setupErr != nil {
		row[3], row[4], row[5] = "did not start: "+r.setupErr.Error(), "-", "-"
		t.add(row, nil)
		return false
	}
	row[3] = fmt.Sprintf("%d crashes, %d wrong results, %d verified all-reduces per rank; half from start-up (%d reached a data listener while the ranks connected, %d found it closed and went to the store), half at the store during collectives; %d of %d closed by the ranks, %d could not connect; %d refusals logged (rate-limited)",
		r.crashes, r.wrong, r.iterations, r.toData, r.dataGone, r.closedBy, r.conns, r.dialFailed, r.refusals)
	row[4], row[5] = "-", "-"
	t.add(row, r.detail)
	return true
}

func (t *table) partition(ctx context.Context, c config) bool {
	r := runPartition(ctx, c.p)
	row := [6]string{"partition: 2+2 ranks on two simulated hosts, link down", "auto (shm + tcp)", "1 job"}
	if r.setupErr != nil {
		row[3], row[4], row[5] = "not run: "+r.setupErr.Error(), "-", "-"
		t.add(row, nil)
		return true // a machine without namespaces is not a failure of the command
	}
	row[3] = fmt.Sprintf("%d/%d ranks named a rank across the partition; %d/%d failed within GOCOMM_TIMEOUT %v (+%v) of the cut, or of their all-reduce's start when it began after the cut",
		r.named, r.ranks, r.inTime, r.ranks, c.p.timeout, partitionSlack)
	row[4], row[5] = fmt.Sprint(r.hangs), p50p99(r.times)
	t.add(row, r.detail)
	return true
}
