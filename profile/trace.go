package profile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trace files are Chrome's JSON trace event format ("JSON Object Format"),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open: one complete
// ("X") event per operation, pid = world rank, one thread per lane of
// overlapping operations. Timestamps are microseconds from the file's
// epoch, which otherData.gocomm_epoch_unix_ns holds (on rank 0's clock when
// an offset was estimated), so that MergeTraces can line ranks up.

// TraceFileName is the name of rank's trace in a trace directory.
func TraceFileName(rank int) string { return fmt.Sprintf("gocomm-trace-rank%d.json", rank) }

// MergedTraceName is the name MergeTraceDir gives the merged trace.
const MergedTraceName = "gocomm-trace.json"

const epochKey = "gocomm_epoch_unix_ns"

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	TraceEvents     []traceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

// WriteTrace writes recs, one rank's records, as a trace with pid =
// worldRank. offset is the rank's clock minus the reference clock (0 if
// unknown); it is subtracted from every start.
func WriteTrace(w io.Writer, worldRank int, recs []Record, offset time.Duration) error {
	recs = append([]Record(nil), recs...)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Start.Before(recs[j].Start) })
	var epoch int64
	if len(recs) > 0 {
		epoch = recs[0].Start.UnixNano() - int64(offset)
	}
	events := []traceEvent{
		{Name: "process_name", Ph: "M", PID: worldRank, Args: map[string]any{"name": fmt.Sprintf("rank %d", worldRank)}},
		{Name: "process_sort_index", Ph: "M", PID: worldRank, Args: map[string]any{"sort_index": worldRank}},
	}
	var laneEnds []int64 // per lane, when its last operation ended (ns from epoch)
	// Per lane, the object collective (Record.Parent) its last operation
	// was: its pieces go in its lane, within its span, so that a trace
	// viewer nests them under it.
	laneParents := []string{}
	for _, r := range recs {
		start := r.Start.UnixNano() - int64(offset) - epoch
		end := start + int64(r.Latency)
		lane := -1
		if r.Parent != "" {
			for i, e := range laneEnds {
				if laneParents[i] == r.Parent && e >= end {
					lane = i
					break
				}
			}
			if lane >= 0 {
				events = append(events, r.traceEvent(worldRank, lane, start))
				continue
			}
		}
		for i, e := range laneEnds {
			if e <= start {
				lane = i
				break
			}
		}
		if lane < 0 {
			lane = len(laneEnds)
			laneEnds = append(laneEnds, 0)
			laneParents = append(laneParents, "")
			name := "collectives"
			if lane > 0 {
				name = fmt.Sprintf("overlapping %d", lane)
			}
			events = append(events, traceEvent{Name: "thread_name", Ph: "M", PID: worldRank, TID: lane, Args: map[string]any{"name": name}})
		}
		laneEnds[lane] = end
		laneParents[lane] = ""
		if strings.HasPrefix(r.Op, "object.") {
			laneParents[lane] = r.Name
		}
		events = append(events, r.traceEvent(worldRank, lane, start))
	}
	f := traceFile{
		TraceEvents:     events,
		DisplayTimeUnit: "ms",
		OtherData: map[string]any{
			epochKey: epoch, "rank": worldRank, "clock_offset_ns": int64(offset), "generator": "gocomm",
		},
	}
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(f); err != nil {
		return err
	}
	return bw.Flush()
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// ErrTrace is wrapped by MergeTraces's errors about its inputs.
var ErrTrace = errors.New("profile: bad trace")

// MergeTraces reads traces (WriteTrace's, or any Chrome JSON trace in the
// object or array format) and writes one trace holding every event, with
// timestamps moved onto the earliest epoch among the inputs. Inputs without
// an epoch are copied unshifted.
func MergeTraces(w io.Writer, inputs ...io.Reader) error {
	type input struct {
		events []map[string]any
		epoch  int64
		has    bool
	}
	ins := make([]input, len(inputs))
	minEpoch, found := int64(0), false
	for i, r := range inputs {
		events, other, err := readTrace(r)
		if err != nil {
			return fmt.Errorf("%w: input %d: %v", ErrTrace, i, err)
		}
		ins[i].events = events
		if n, ok := other[epochKey].(json.Number); ok {
			e, err := n.Int64()
			if err != nil {
				return fmt.Errorf("%w: input %d: otherData.%s = %s is not an integer", ErrTrace, i, epochKey, n)
			}
			ins[i].epoch, ins[i].has = e, true
			if !found || e < minEpoch {
				minEpoch, found = e, true
			}
		}
	}
	all := []map[string]any{}
	for _, in := range ins {
		shift := 0.0
		if in.has {
			shift = float64(in.epoch-minEpoch) / 1e3
		}
		for _, ev := range in.events {
			if ts, ok := ev["ts"].(json.Number); ok && ev["ph"] != "M" && shift != 0 {
				f, err := ts.Float64()
				if err != nil {
					return fmt.Errorf("%w: ts %s is not a number", ErrTrace, ts)
				}
				ev["ts"] = f + shift
			}
			all = append(all, ev)
		}
	}
	out := map[string]any{
		"traceEvents":     all,
		"displayTimeUnit": "ms",
		"otherData":       map[string]any{epochKey: minEpoch, "merged_inputs": len(inputs), "generator": "gocomm"},
	}
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(out); err != nil {
		return err
	}
	return bw.Flush()
}

// readTrace decodes a trace in the object or the array format.
func readTrace(r io.Reader) ([]map[string]any, map[string]any, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, err
	}
	data = bytes.TrimSpace(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if len(data) > 0 && data[0] == '[' {
		var events []map[string]any
		if err := dec.Decode(&events); err != nil {
			return nil, nil, err
		}
		return dropNil(events), nil, nil
	}
	var f struct {
		TraceEvents []map[string]any `json:"traceEvents"`
		OtherData   map[string]any   `json:"otherData"`
	}
	if err := dec.Decode(&f); err != nil {
		return nil, nil, err
	}
	return dropNil(f.TraceEvents), f.OtherData, nil
}

func dropNil(events []map[string]any) []map[string]any {
	out := events[:0]
	for _, e := range events {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// TraceFiles expands paths for merging: a directory stands for the rank
// traces in it (TraceFileName, in rank order), a file for itself. It is an
// error if nothing is left.
func TraceFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "gocomm-trace-rank*.json"))
		if err != nil {
			return nil, err
		}
		sort.Slice(matches, func(i, j int) bool { return rankOf(matches[i]) < rankOf(matches[j]) })
		out = append(out, matches...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no trace files in %q (want %s files or a directory of them)", ErrTrace, paths, TraceFileName(0))
	}
	return out, nil
}

func rankOf(path string) int {
	s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "gocomm-trace-rank"), ".json")
	n, err := strconv.Atoi(s)
	if err != nil {
		return math.MaxInt
	}
	return n
}

// MergeTraceFiles merges the traces paths name (see TraceFiles) into w.
func MergeTraceFiles(w io.Writer, paths []string) error {
	files, err := TraceFiles(paths)
	if err != nil {
		return err
	}
	readers := make([]io.Reader, len(files))
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		readers[i] = f
	}
	if err := MergeTraces(w, readers...); err != nil {
		return fmt.Errorf("merging %v: %w", files, err)
	}
	return nil
}

// MergeTraceDir merges the rank traces in dir into dir/MergedTraceName and
// returns its path: what a launcher calls once every rank has exited.
func MergeTraceDir(dir string) (string, error) {
	out := filepath.Join(dir, MergedTraceName)
	var buf bytes.Buffer
	if err := MergeTraceFiles(&buf, []string{dir}); err != nil {
		return "", err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// WriteTraceFile writes a rank's trace to dir/TraceFileName(worldRank),
// creating dir if needed, and returns the file's path.
func WriteTraceFile(dir string, worldRank int, recs []Record, offset time.Duration) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, TraceFileName(worldRank))
	var buf bytes.Buffer
	if err := WriteTrace(&buf, worldRank, recs, offset); err != nil {
		return "", err
	}
	// Write then rename, so that a launcher merging never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// traceEvent is r's complete event, in lane, start nanoseconds after the
// trace's epoch.
func (r Record) traceEvent(worldRank, lane int, start int64) traceEvent {
	dur := float64(r.Latency) / 1e3
	args := map[string]any{
		"op": r.Op, "bytes": r.Bytes, "size": ConvertSize(r.Bytes), "total_bytes": r.TotalBytes,
		"comm": r.Comm, "comm_size": r.CommSize, "rank": r.Rank, "seq": r.Seq,
		"algbw_gbs": round3(r.AlgBW), "busbw_gbs": round3(r.BusBW),
	}
	if r.Parent != "" {
		args["parent"] = r.Parent
	}
	if r.DType != "" {
		args["dtype"] = r.DType
	}
	if r.Algorithm != "" {
		args["algorithm"] = r.Algorithm
	}
	if r.Root >= 0 {
		args["root"] = r.Root
	}
	if r.Peer >= 0 {
		args["peer"] = r.Peer
	}
	if r.Err != "" {
		args["error"] = r.Err
	}
	return traceEvent{
		Name: r.Name, Cat: r.Op, Ph: "X", TS: float64(start) / 1e3, Dur: &dur,
		PID: worldRank, TID: lane, Args: args,
	}
}
