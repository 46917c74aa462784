package comm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/profile"
)

// profiledWorld is a local world of n ranks with the comms logger on.
func profiledWorld(t testing.TB, n int, cfg profile.Config) []*comm.Comm {
	t.Helper()
	if !comm.ProfileCompiledIn {
		t.Skip("built with -tags gocomm_noprofile")
	}
	cfg.Enabled = true
	return testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute, Profile: &cfg})
	})
}

// onEveryRank runs f on every rank of world concurrently and fails the test
// with the ranks' errors.
func onEveryRank(t testing.TB, world []*comm.Comm, f func(ctx context.Context, c *comm.Comm) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testkit.NoErrors(t, testkit.OnEveryRank(world, func(_ int, c *comm.Comm) error { return f(ctx, c) }))
}

// everyOp runs one of each operation on a world of 3.
func everyOp(ctx context.Context, c *comm.Comm) error {
	n, r := c.Size(), c.Rank()
	f4 := make([]float32, 4)
	steps := []func() error{
		func() error { return comm.AllReduce(ctx, c, f4, f4, comm.Sum) },
		func() error { return comm.Reduce(ctx, c, f4, make([]float32, 4), comm.Sum, 1) },
		func() error { return comm.Broadcast(ctx, c, make([]int64, 2), 0) },
		func() error { return comm.AllGather(ctx, c, make([]float32, 4), make([]float32, 4*n)) },
		func() error {
			counts := []int{1, 2, 3}
			return comm.AllGatherV(ctx, c, make([]float32, counts[r]), make([]float32, 6), counts)
		},
		func() error { return comm.Gather(ctx, c, make([]float64, 2), make([]float64, 2*n), 2) },
		func() error { return comm.Scatter(ctx, c, make([]float64, 2*n), make([]float64, 2), 0) },
		func() error { return comm.ReduceScatter(ctx, c, make([]float32, 4*n), make([]float32, 4), comm.Sum) },
		func() error { return comm.AllToAll(ctx, c, make([]int32, 2*n), make([]int32, 2*n)) },
		func() error { return comm.Barrier(ctx, c) },
		func() error {
			recv := comm.StartRecv(ctx, c, make([]uint8, 5), (r+n-1)%n, 3)
			if err := comm.Send(ctx, c, make([]uint8, 5), (r+1)%n, 3); err != nil {
				return err
			}
			return recv.Wait()
		},
	}
	for i, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

func TestProfileRecordsEveryOp(t *testing.T) {
	world := profiledWorld(t, 3, profile.Config{})
	onEveryRank(t, world, everyOp)
	// op -> S, T (bytes), root, whether it has a peer
	want := map[string]struct {
		s, t int64
		root int
	}{
		profile.OpAllReduce:     {16, 16, -1},
		profile.OpReduce:        {16, 16, 1},
		profile.OpBroadcast:     {16, 16, 0},
		profile.OpAllGather:     {16, 48, -1},
		profile.OpAllGatherV:    {-1, 24, -1}, // S is this rank's count
		profile.OpGather:        {16, 48, 2},
		profile.OpScatter:       {16, 48, 0},
		profile.OpReduceScatter: {48, 48, -1},
		profile.OpAllToAll:      {24, 24, -1},
		profile.OpBarrier:       {0, 0, -1},
		profile.OpSend:          {5, 5, -1},
		profile.OpRecv:          {5, 5, -1},
	}
	for r, c := range world {
		recs := c.Profiler().Records()
		if len(recs) != len(want) {
			t.Errorf("rank %d: %d records, want %d", r, len(recs), len(want))
		}
		seen := map[string]bool{}
		for _, rec := range recs {
			w, ok := want[rec.Op]
			if !ok {
				t.Errorf("rank %d: unexpected record %+v", r, rec)
				continue
			}
			seen[rec.Op] = true
			if w.s < 0 {
				w.s = int64(4 * (r + 1))
			}
			if rec.Bytes != w.s || rec.TotalBytes != w.t {
				t.Errorf("rank %d %s: bytes %d, total %d, want %d, %d", r, rec.Op, rec.Bytes, rec.TotalBytes, w.s, w.t)
			}
			if rec.Name != rec.Op || rec.CommSize != 3 || rec.Rank != r || rec.WorldRank != r || rec.Root != w.root || rec.Err != "" {
				t.Errorf("rank %d: record %+v", r, rec)
			}
			p2p := rec.Op == profile.OpSend || rec.Op == profile.OpRecv
			switch {
			case p2p && (rec.Seq != 0 || rec.Algorithm != "" || rec.Peer < 0):
				t.Errorf("rank %d: point-to-point record %+v", r, rec)
			case !p2p && (rec.Seq == 0 || rec.Algorithm == "" || rec.Peer != -1):
				t.Errorf("rank %d: collective record without seq or algorithm: %+v", r, rec)
			}
			if rec.Op == profile.OpSend && rec.Peer != (r+1)%3 || rec.Op == profile.OpRecv && rec.Peer != (r+2)%3 {
				t.Errorf("rank %d: %s peer %d", r, rec.Op, rec.Peer)
			}
			if rec.Latency <= 0 || rec.Start.IsZero() {
				t.Errorf("rank %d %s: latency %v, start %v", r, rec.Op, rec.Latency, rec.Start)
			}
			alg, bus := profile.Bandwidth(rec.Op, rec.TotalBytes, 3, rec.Latency)
			if rec.AlgBW != alg || rec.BusBW != bus {
				t.Errorf("rank %d %s: bandwidths %v, %v, want %v, %v", r, rec.Op, rec.AlgBW, rec.BusBW, alg, bus)
			}
			if rec.TotalBytes > 0 && math.Abs(rec.BusBW/rec.AlgBW-profile.BusFactor(rec.Op, 3)) > 1e-12 {
				t.Errorf("rank %d %s: busbw/algbw = %v", r, rec.Op, rec.BusBW/rec.AlgBW)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("rank %d: ops recorded %v", r, seen)
		}
	}
}

func TestProfileSelectionLogNamesAndDebug(t *testing.T) {
	world := profiledWorld(t, 2, profile.Config{OpsOnly: true, Ops: []string{"broadcast", "grads"}, Debug: true})
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		buf := make([]float32, 2)
		for _, step := range []func() error{
			func() error { return comm.AllReduce(comm.WithLogName(ctx, "grads"), c, buf, buf, comm.Sum) },     // by log name
			func() error { return comm.AllReduce(ctx, c, buf, buf, comm.Sum) },                                // not selected
			func() error { return comm.Broadcast(ctx, c, buf, 0) },                                            // by op name
			func() error { return comm.Broadcast(comm.WithProfiling(ctx, false), c, buf, 0) },                 // suppressed
			func() error { return comm.AllGather(comm.WithProfiling(ctx, true), c, buf, make([]float32, 4)) }, // forced
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	for r, c := range world {
		var got []string
		for _, rec := range c.Profiler().Records() {
			got = append(got, rec.Name)
		}
		const caller = " | [Caller Func: comm_test.TestProfileSelectionLogNamesAndDebug."
		if len(got) != 3 || !strings.HasPrefix(got[0], "grads"+caller) || !strings.HasPrefix(got[1], "broadcast"+caller) ||
			!strings.HasPrefix(got[2], "all_gather"+caller) {
			t.Errorf("rank %d records %q, want grads, broadcast and all_gather named after this test's closures", r, got)
		}
	}
}

func TestProfileAsyncTimedToCompletion(t *testing.T) {
	world := profiledWorld(t, 2, profile.Config{})
	const late, waitAfter = 40 * time.Millisecond, 300 * time.Millisecond
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		buf := make([]float64, 8)
		if c.Rank() == 1 {
			time.Sleep(late)
			return comm.AllReduce(ctx, c, buf, buf, comm.Sum)
		}
		w := comm.StartAllReduce(comm.WithLogName(ctx, "async"), c, buf, buf, comm.Sum)
		time.Sleep(waitAfter) // the op completes long before anyone waits
		return w.Wait()
	})
	recs := world[0].Profiler().Records()
	if len(recs) != 1 || recs[0].Name != "async" {
		t.Fatalf("records %+v", recs)
	}
	if lat := recs[0].Latency; lat < late/2 || lat >= waitAfter {
		t.Errorf("async all-reduce latency %v, want from its start to its completion: about %v, under %v", lat, late, waitAfter)
	}
}

func TestLogSummaryNamesTheStraggler(t *testing.T) {
	// 12 collectives: last in all of them is p = (1/3)^12, well below the
	// test's 0.001/3; in 4 of them it would not be named.
	const n, late, ops = 3, 50 * time.Millisecond, 12
	world := profiledWorld(t, n, profile.Config{ClockSync: profile.ClockSyncAlways})
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		buf := make([]float32, 2)
		for range ops {
			if c.Rank() == 2 {
				time.Sleep(late) // the straggler, on purpose
			}
			if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
				return err
			}
		}
		return nil
	})
	before := len(world[0].Profiler().Records())
	outs := make([]bytes.Buffer, n)
	reports := make([]*profile.StragglerReport, n)
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		if err := c.Profiler().LogSummary(ctx, &outs[c.Rank()], true); err != nil {
			return err
		}
		var err error
		reports[c.Rank()], err = c.Profiler().StragglerReport(ctx)
		return err
	})
	out := outs[0].String()
	for _, want := range []string{
		"Comm. Op            Message Size        Count               Total Latency(ms)",
		"all_reduce\n                    8.0 B               12 ",
		"straggler: rank 2 came last in 12 of 12 collectives (100%; expected 1/3 = 33% by chance; p = 1.9e-06)",
		"2 (12/12)",
		"clock offsets from rank 0 (ms): rank 1 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's summary lacks %q:\n%s", want, out)
		}
	}
	if outs[1].Len() != 0 || outs[2].Len() != 0 {
		t.Errorf("ranks 1 and 2 printed %q and %q, want nothing", outs[1].String(), outs[2].String())
	}
	if after := len(world[0].Profiler().Records()); after != before {
		t.Errorf("LogSummary's own operations were recorded: %d records, then %d", before, after)
	}
	rep := reports[0]
	if rep == nil || reports[1] != nil || reports[2] != nil {
		t.Fatalf("StragglerReport on ranks 0, 1, 2: %v, %v, %v; want a report on rank 0 only", rep, reports[1], reports[2])
	}
	if rep.Straggler != 2 || rep.Ops != ops || len(rep.Rows) != 1 || rep.Rows[0].Last != 2 {
		t.Errorf("report %+v", rep)
	}
	if rep.Rows[0].AvgSkew < float64(late)/1e6*0.8 {
		t.Errorf("average skew %.2f ms, want about %v", rep.Rows[0].AvgSkew, late)
	}
	// One host, one clock: the estimated offsets must be within their
	// uncertainty of zero (plus scheduling noise).
	if len(rep.Offsets) != n-1 {
		t.Errorf("offsets %+v, want one per rank but 0", rep.Offsets)
	}
	for _, o := range rep.Offsets {
		if o.Offset.Abs() > o.Uncertainty+2*time.Millisecond {
			t.Errorf("rank %d: clock offset %v ± %v on a shared clock", o.Rank, o.Offset, o.Uncertainty)
		}
	}
}

func TestProfileJSONAndTraceHoldEveryOp(t *testing.T) {
	world := profiledWorld(t, 3, profile.Config{ClockSync: profile.ClockSyncOff})
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		if err := everyOp(ctx, c); err != nil {
			return err
		}
		// Two overlapping asynchronous all-reduces.
		a, b := make([]float32, 1024), make([]float32, 1024)
		wa := comm.StartAllReduce(comm.WithLogName(ctx, "bucket0"), c, a, a, comm.Sum)
		wb := comm.StartAllReduce(comm.WithLogName(ctx, "bucket1"), c, b, b, comm.Sum)
		if err := errors.Join(wa.Wait(), wb.Wait()); err != nil {
			return err
		}
		// A group of ranks 0 and 2 shares the world's logger.
		g, err := c.NewGroup(ctx, []int{0, 2})
		if err != nil {
			return err
		}
		if g.IsMember() {
			if err := comm.AllReduce(comm.WithLogName(ctx, "group"), g, a, a, comm.Max); err != nil {
				return err
			}
		}
		return nil
	})
	dir := t.TempDir()
	total := 0
	for r, c := range world {
		recs := c.Profiler().Records()
		total += len(recs)
		var b bytes.Buffer
		if err := c.Profiler().WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		var rep profile.Report
		if err := json.Unmarshal(b.Bytes(), &rep); err != nil {
			t.Fatalf("rank %d: JSON does not parse: %v", r, err)
		}
		if len(rep.Records) != len(recs) || rep.Rank != r || len(rep.Summary) == 0 {
			t.Errorf("rank %d: JSON has %d records and %d rows, want %d records", r, len(rep.Records), len(rep.Summary), len(recs))
		}
		for i := range recs {
			if rep.Records[i].Name != recs[i].Name || rep.Records[i].Seq != recs[i].Seq || rep.Records[i].Latency != recs[i].Latency {
				t.Errorf("rank %d: JSON record %d = %+v, want %+v", r, i, rep.Records[i], recs[i])
			}
		}
		group := 0
		for _, rec := range recs {
			if rec.Name == "group" {
				group++
				if rec.CommSize != 2 || rec.Comm == 1 {
					t.Errorf("rank %d: group record %+v, want its own communicator of 2", r, rec)
				}
			}
		}
		if wantGroup := map[bool]int{true: 1, false: 0}[r != 1]; group != wantGroup {
			t.Errorf("rank %d: %d group records, want %d", r, group, wantGroup)
		}
		if _, err := c.Profiler().WriteTraceFile(dir); err != nil {
			t.Fatal(err)
		}
	}
	merged, err := profile.MergeTraceDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(merged)
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			TS   *float64       `json:"ts"`
			Dur  *float64       `json:"dur"`
			PID  int            `json:"pid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &trace); err != nil {
		t.Fatalf("merged trace does not parse: %v", err)
	}
	events, pids := 0, map[int]int{}
	for _, e := range trace.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		events++
		pids[e.PID]++
		if e.TS == nil || e.Dur == nil || e.Args["bytes"] == nil || e.Args["seq"] == nil || e.Args["op"] == nil {
			t.Errorf("event %+v lacks ts, dur, bytes, seq or op", e)
		}
		if op := e.Args["op"]; op != "send" && op != "recv" && e.Args["algorithm"] == nil {
			t.Errorf("collective event %+v lacks its algorithm", e)
		}
	}
	if events != total || len(pids) != 3 {
		t.Errorf("merged trace: %d op events over pids %v, want %d over 3 ranks", events, pids, total)
	}
	if _, err := os.Stat(filepath.Join(dir, profile.TraceFileName(2))); err != nil {
		t.Error(err)
	}
}

func TestProfileVerboseAndReset(t *testing.T) {
	var out testkit.LockedBuffer
	world := profiledWorld(t, 2, profile.Config{Verbose: true, Output: &out, Layout: profile.LayoutDeepSpeed})
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		buf := make([]float32, 256)
		return comm.AllReduce(comm.WithLogName(ctx, "grads"), c, buf, buf, comm.Sum)
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "comm op: grads | time (ms): ") ||
		!strings.Contains(lines[0], "| msg size: 1.0 KB | algbw (Gbps): ") {
		t.Errorf("verbose output %q, want one line from rank 0", out.String())
	}
	var b bytes.Buffer
	if err := world[0].Profiler().LogSummary(context.Background(), &b, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "tput_avg (Gbps)") {
		t.Errorf("DeepSpeed layout summary:\n%s", b.String())
	}
	if err := world[0].Profiler().LogSummary(context.Background(), nil, false); err != nil {
		t.Errorf("LogSummary to a nil writer: %v", err)
	}
	world[0].Profiler().Reset()
	if n := len(world[0].Profiler().Records()); n != 0 {
		t.Errorf("%d records after Reset", n)
	}
	if n := len(world[1].Profiler().Records()); n != 1 {
		t.Errorf("Reset on rank 0 changed rank 1's records: %d", n)
	}
}

func TestProfileOff(t *testing.T) {
	world, err := comm.NewLocalWorld(2, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(world)
	outs := make([]bytes.Buffer, 2)
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		buf := make([]float32, 2)
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			return err
		}
		return c.Profiler().LogSummary(ctx, &outs[c.Rank()], true)
	})
	if world[0].Profiler().Enabled() || world[0].Profiler().Records() != nil || outs[0].Len() != 0 {
		t.Errorf("logger off: Profiling %v, records %v, summary %q", world[0].Profiler().Enabled(), world[0].Profiler().Records(), outs[0].String())
	}
	var b bytes.Buffer
	if err := world[0].Profiler().WriteJSON(&b); err != nil || !strings.Contains(b.String(), `"records": []`) {
		t.Errorf("JSON with the logger off: %s, %v", b.String(), err)
	}
	if _, err := comm.NewLocalWorld(2, comm.Options{Profile: &profile.Config{Enabled: true, Layout: 9}}); !errors.Is(err, comm.ErrInvalid) {
		t.Errorf("NewLocalWorld with a bad Profile = %v, want ErrInvalid", err)
	}
	off, err := comm.NewLocalWorld(1, comm.Options{Profile: &profile.Config{Enabled: false, Verbose: true}})
	if err != nil || off[0].Profiler().Enabled() {
		t.Errorf("Enabled: false must be off: %v, %v", off[0].Profiler().Enabled(), err)
	}
	closeAll(off)
}

func TestProfileFromEnvironment(t *testing.T) {
	if !comm.ProfileCompiledIn {
		t.Skip("built with -tags gocomm_noprofile")
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "ds_config.json")
	if err := os.WriteFile(cfgFile, []byte(`{"train_batch_size": 8, "comms_logger": {"enabled": true, "prof_all": false, "prof_ops": ["all_reduce"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	traceDir := filepath.Join(dir, "trace")
	env := map[string]string{"GOCOMM_PROFILE": cfgFile, "GOCOMM_PROFILE_LAYOUT": "deepspeed", "GOCOMM_TRACE_DIR": traceDir}
	ctx := context.Background()
	c, err := comm.Init(ctx, comm.Options{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]float32, 4)
	if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
		t.Fatal(err)
	}
	if err := comm.Broadcast(ctx, c, buf, 0); err != nil { // not in prof_ops
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.Profiler().LogSummary(ctx, &b, true); err != nil {
		t.Fatal(err)
	}
	if !c.Profiler().Enabled() || len(c.Profiler().Records()) != 1 || !strings.Contains(b.String(), "all_reduce") ||
		strings.Contains(b.String(), "broadcast") || !strings.Contains(b.String(), "tput_avg (Gbps)") {
		t.Errorf("from GOCOMM_PROFILE=%s: records %+v, summary:\n%s", cfgFile, c.Profiler().Records(), b.String())
	}
	if _, err := os.Stat(filepath.Join(traceDir, profile.TraceFileName(0))); err != nil {
		t.Errorf("GOCOMM_TRACE_DIR: %v", err)
	}
	bad := map[string]string{"GOCOMM_PROFILE": filepath.Join(dir, "missing.json")}
	if _, err := comm.Init(ctx, comm.Options{Getenv: func(k string) string { return bad[k] }}); !errors.Is(err, comm.ErrEnvironment) {
		t.Errorf("Init with a missing GOCOMM_PROFILE file = %v, want ErrEnvironment", err)
	}
}

// TestProfileOverTCP runs the logger and the straggler analysis on a world
// that Init built over TCP.
func TestProfileOverTCP(t *testing.T) {
	if !comm.ProfileCompiledIn {
		t.Skip("built with -tags gocomm_noprofile")
	}
	world := tcpWorld(t, 2, comm.Options{Timeout: time.Minute, Profile: &profile.Config{Enabled: true}})
	outs := make([]bytes.Buffer, 2)
	onEveryRank(t, world, func(ctx context.Context, c *comm.Comm) error {
		buf := make([]float32, 1<<10)
		// 12 times last of 2 is p = 2.4e-4, below the test's 0.001/2.
		for range 12 {
			if c.Rank() == 0 {
				time.Sleep(20 * time.Millisecond)
			}
			if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
				return err
			}
		}
		return c.Profiler().LogSummary(ctx, &outs[c.Rank()], true)
	})
	if out := outs[0].String(); !strings.Contains(out, "                    4.0 KB              12 ") ||
		!strings.Contains(out, "straggler: rank 0 came last in 12 of 12") {
		t.Errorf("summary over TCP:\n%s", out)
	}
}
