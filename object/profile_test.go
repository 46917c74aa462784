package object_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/object"
	"github.com/gocomm/comm/profile"
)

// everyObjectOp runs each object collective once.
func everyObjectOp(ctx context.Context, c *comm.Comm) error {
	v := map[string]int{}
	if c.Rank() == 0 {
		v["x"] = 1
	}
	if err := object.Broadcast(ctx, c, &v, 0); err != nil {
		return err
	}
	if _, err := object.AllGather(ctx, c, c.Rank()); err != nil {
		return err
	}
	if _, err := object.Gather(ctx, c, c.Rank(), 1); err != nil {
		return err
	}
	if _, err := object.Scatter(ctx, c, []string{"a", "b", "c"}, 2); err != nil {
		return err
	}
	sum := func(a, b int) int { return a + b }
	if _, err := object.Reduce(ctx, c, c.Rank(), sum, 0); err != nil {
		return err
	}
	if _, err := object.AllReduce(ctx, c, c.Rank(), sum, object.Associative()); err != nil {
		return err
	}
	return nil
}

var objectOps = []string{"object.Broadcast", "object.AllGather", "object.Gather", "object.Scatter", "object.Reduce", "object.AllReduce"}

// The comms logger records each object collective under its own name and
// its pieces (the exchange of sizes, the payloads) under it, not as
// top-level rows of the summary.
func TestObjectCollectivesInTheProfile(t *testing.T) {
	world := testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(3, comm.Options{Timeout: time.Minute, Profile: &profile.Config{Enabled: true}})
	})
	if !world[0].Profiler().Enabled() {
		t.Skip("the comms logger is compiled out (-tags gocomm_noprofile)")
	}
	_, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (struct{}, error) {
		return struct{}{}, everyObjectOp(ctx, c)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	recs := world[0].Profiler().Records()
	names := map[string]int{}
	for _, r := range recs {
		if r.Parent == "" {
			names[r.Name]++
			if !strings.HasPrefix(r.Name, "object.") {
				t.Errorf("a piece recorded at the top level: %+v", r)
			}
		} else if !strings.HasPrefix(r.Parent, "object.") {
			t.Errorf("record %+v has parent %q", r, r.Parent)
		}
	}
	for _, op := range objectOps {
		if names[op] != 1 {
			t.Errorf("%s: %d top-level records, want 1 (records: %v)", op, names[op], names)
		}
	}
	var b bytes.Buffer
	if err := profile.WriteSummary(&b, profile.Summarize(recs, profile.LayoutGBs), profile.LayoutGBs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Each object collective's section (up to the next top-level line)
	// holds its pieces.
	sections := map[string]string{}
	top := ""
	for _, line := range strings.Split(out, "\n")[1:] {
		if line != "" && line[0] != ' ' {
			top = line
		}
		sections[top] += line + "\n"
	}
	for op, pieces := range map[string][]string{
		"object.Broadcast": {"broadcast"},
		"object.AllGather": {"all_gather", "all_gather_v"},
		"object.Gather":    {"all_gather", "gather_v"},
		"object.Scatter":   {"broadcast", "scatter_v"},
		"object.Reduce":    {"all_gather", "gather_v", "broadcast"},
		"object.AllReduce": {"all_gather", "send", "recv"},
	} {
		for _, p := range pieces {
			if !strings.Contains(sections[op], "\n  > "+p+"\n") {
				t.Errorf("%s's section lacks its piece %s:\n%s", op, p, out)
			}
		}
	}
	for _, line := range strings.Split(out, "\n")[1:] {
		if line != "" && line[0] != ' ' && !strings.HasPrefix(line, "object.") {
			t.Errorf("summary has a top-level row %q that is not an object collective:\n%s", line, out)
		}
	}
}

// The flight recorder enters each object collective under its name with
// the sequence numbers of its pieces, and labels the pieces with it.
func TestObjectCollectivesInTheFlightRecord(t *testing.T) {
	world := localWorld(t, 3)
	_, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (struct{}, error) {
		return struct{}{}, everyObjectOp(ctx, c)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	fr := world[1].FlightRecorder().Snapshot()
	var seen []string
	for _, fc := range fr.Comms {
		if fc.ID != fr.Comms[0].ID {
			continue // private views of object.AllReduce's tree
		}
		for _, op := range fc.Recent {
			switch {
			case strings.HasPrefix(op.Op, "object."):
				seen = append(seen, op.Op)
				if op.Seq != 0 || op.FirstSeq == 0 || op.LastSeq < op.FirstSeq || op.State != "done" {
					t.Errorf("object collective entry %+v, want no seq of its own and its pieces' first and last", op)
				}
			case op.Part == "":
				t.Errorf("collective %s #%d is no object collective's piece: %+v", op.Op, op.Seq, op)
			}
		}
	}
	if strings.Join(seen, " ") != strings.Join(objectOps, " ") {
		t.Errorf("object collectives in the flight record: %v, want %v", seen, objectOps)
	}
}
