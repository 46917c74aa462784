package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// parsedTrace is what a trace viewer reads from a file.
type parsedTrace struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		TS   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		PID  int            `json:"pid"`
		TID  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	OtherData map[string]any `json:"otherData"`
}

func parseTrace(t *testing.T, data []byte) parsedTrace {
	t.Helper()
	var p parsedTrace
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("trace does not parse: %v\n%s", err, data)
	}
	return p
}

func traceRecords(base time.Time) []Record {
	return []Record{
		{Op: OpAllReduce, Name: "grads", Comm: 1, CommSize: 2, Seq: 1, Bytes: 8, TotalBytes: 8, DType: "float32",
			Algorithm: "ring", Root: -1, Peer: -1, Start: base, Latency: 2 * time.Millisecond},
		// Overlaps the first: a second lane.
		{Op: OpBroadcast, Name: "broadcast", Comm: 1, CommSize: 2, Seq: 2, Bytes: 1024, TotalBytes: 1024,
			Algorithm: "tree", Root: 0, Peer: -1, Start: base.Add(time.Millisecond), Latency: time.Millisecond},
		{Op: OpSend, Name: "send", Comm: 1, CommSize: 2, Bytes: 4, TotalBytes: 4, Root: -1, Peer: 1,
			Start: base.Add(5 * time.Millisecond), Latency: time.Microsecond, Err: "comm: closed"},
	}
}

func TestWriteTrace(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	var b bytes.Buffer
	if err := WriteTrace(&b, 3, traceRecords(base), 0); err != nil {
		t.Fatal(err)
	}
	p := parseTrace(t, b.Bytes())
	var ops []string
	lanes := map[string]int{}
	for _, e := range p.TraceEvents {
		if e.PID != 3 {
			t.Errorf("event %q has pid %d, want 3", e.Name, e.PID)
		}
		if e.Ph != "X" {
			continue
		}
		ops = append(ops, e.Name)
		lanes[e.Name] = e.TID
		if e.Name == "grads" && (e.TS != 0 || e.Dur != 2000 || e.Args["algorithm"] != "ring" || e.Args["bytes"] != 8.0 || e.Args["seq"] != 1.0) {
			t.Errorf("grads event = %+v", e)
		}
		if e.Name == "broadcast" && (e.TS != 1000 || e.Args["root"] != 0.0) {
			t.Errorf("broadcast event = %+v", e)
		}
		if e.Name == "send" && (e.Args["peer"] != 1.0 || e.Args["error"] != "comm: closed") {
			t.Errorf("send event = %+v", e)
		}
	}
	if strings.Join(ops, ",") != "grads,broadcast,send" {
		t.Errorf("X events = %v, want every op", ops)
	}
	if lanes["grads"] == lanes["broadcast"] || lanes["send"] != lanes["grads"] {
		t.Errorf("lanes = %v: overlapping ops need their own lane, others reuse the first", lanes)
	}
	if p.OtherData[epochKey] != float64(base.UnixNano()) {
		t.Errorf("epoch = %v, want %d", p.OtherData[epochKey], base.UnixNano())
	}
}

func TestMergeTraces(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	dir := t.TempDir()
	// Rank 1 starts 10 ms after rank 0 but its clock is 4 ms ahead.
	if _, err := WriteTraceFile(dir, 0, traceRecords(base), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTraceFile(dir, 1, traceRecords(base.Add(14*time.Millisecond)), 4*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// A file that is not a rank trace is ignored when the directory is given.
	if err := os.WriteFile(filepath.Join(dir, "notes.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := MergeTraceDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	p := parseTrace(t, data)
	count := map[int]int{}
	for _, e := range p.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		count[e.PID]++
		if e.Name == "grads" && e.PID == 1 && e.TS != 10000 {
			t.Errorf("rank 1's first op at %v µs, want 10000 (10 ms after rank 0's)", e.TS)
		}
		if e.Name == "grads" && e.PID == 0 && e.TS != 0 {
			t.Errorf("rank 0's first op at %v µs, want 0", e.TS)
		}
	}
	if count[0] != 3 || count[1] != 3 {
		t.Errorf("merged X events per rank = %v, want 3 each", count)
	}
	// A merged trace merges again (idempotent on one input), and the array
	// format is accepted.
	var b bytes.Buffer
	if err := MergeTraces(&b, bytes.NewReader(data), strings.NewReader(`[{"name":"x","ph":"X","ts":5,"dur":1,"pid":9,"tid":0}]`)); err != nil {
		t.Fatal(err)
	}
	if p2 := parseTrace(t, b.Bytes()); len(p2.TraceEvents) != len(p.TraceEvents)+1 {
		t.Errorf("re-merge has %d events, want %d", len(p2.TraceEvents), len(p.TraceEvents)+1)
	}
	if err := MergeTraces(&b, strings.NewReader("{")); !errors.Is(err, ErrTrace) {
		t.Errorf("MergeTraces(bad) = %v, want ErrTrace", err)
	}
	if _, err := TraceFiles([]string{t.TempDir()}); !errors.Is(err, ErrTrace) {
		t.Errorf("TraceFiles(empty dir) = %v, want ErrTrace", err)
	}
}

func TestTraceFilesOrder(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []int{10, 2, 0, 1} {
		if err := os.WriteFile(filepath.Join(dir, TraceFileName(r)), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := TraceFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	want := "gocomm-trace-rank0.json,gocomm-trace-rank1.json,gocomm-trace-rank2.json,gocomm-trace-rank10.json"
	if strings.Join(got, ",") != want {
		t.Errorf("TraceFiles = %v", got)
	}
}

func FuzzMergeTraces(f *testing.F) {
	var b bytes.Buffer
	if err := WriteTrace(&b, 0, traceRecords(time.Unix(1_700_000_000, 0)), 0); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`[{"ph":"X","ts":"x"}]`))
	f.Add([]byte(`{"traceEvents":[null,{"ts":1}],"otherData":{"gocomm_epoch_unix_ns":1.5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		if err := MergeTraces(&out, bytes.NewReader(data), bytes.NewReader(data)); err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("merged output does not parse: %v", err)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{`{"comms_logger": {"enabled": true, "prof_ops": ["a"]}}`, `{"enabled": 1}`, `[]`, `{"layout": "deepspeed"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err == nil && cfg.Validate() != nil {
			t.Fatalf("ParseConfig accepted an invalid config: %+v", cfg)
		}
	})
}
