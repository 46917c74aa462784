package bench

import (
	"bytes"
	"encoding/csv"
	"reflect"
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

func sampleResults() []Result {
	mk := func(series string, op Op, size int64, sec float64, wrong int64) Result {
		return Summarize(series, 2, core.Float32, core.Sum, Sample{Case: Case{Op: op, Bytes: size, Warmup: 5, Iters: 2}, Times: []float64{sec, sec}, Wrong: wrong})
	}
	return []Result{
		mk("a", AllReduce, 8, 12.3456e-6, 0),
		mk("a", AllReduce, 1<<20, 250e-6, 0),
		mk("a", AllReduce, 64<<20, 0.05, 0),
		mk("a", Broadcast, 64<<20, 0.02, -1),
		{Series: "a", Op: ReduceScatter, Bytes: 64 << 20, Count: 16 << 20, DType: "float32", RedOp: "sum", Root: -1, Ranks: 2, Wrong: -1, Skip: "not supported"},
		mk("b", AllReduce, 8, 2e-6, 3),
		mk("b", AllReduce, 64<<20, 0.1, 0),
		mk("a", Barrier, 0, 3e-6, 0),
	}
}

func TestTableWriter(t *testing.T) {
	var buf bytes.Buffer
	tw := NewTableWriter(&buf)
	tw.Header(Meta{Series: "native/tcp", Backend: "native", Transport: "tcp", Ranks: 2, DType: "float32", RedOp: "sum", Warmup: 5, Iters: 20, Budget: 1 << 30, Check: true, Algo: "allreduce=ring"})
	rs := sampleResults()
	for _, r := range rs {
		tw.Row(r)
	}
	tw.Footer(rs)
	out := buf.String()
	for _, want := range []string{
		"2 ranks, backend native, transport tcp",
		"warm-up 5, iterations 20 (at most 1 GiB per size), check on, algorithms allreduce=ring",
		"# allreduce\n",
		"size        count     type  redop  root       time    algbw    busbw  #wrong",
		// nccl-tests' precision: 2 decimals below 100 us, 1 below 10 ms, none above.
		"           8            2  float32    sum    -1      12.35     0.00     0.00       0\n",
		"     1048576       262144  float32    sum    -1      250.0     4.19     4.19       0\n",
		"    67108864     16777216  float32    sum    -1      50000     1.34     1.34       0\n",
		"float32   none     0      20000     3.36     3.36     N/A\n", // broadcast: root 0, no redop, unchecked
		"skipped: not supported",
		"# Out of bounds values : 3 FAILED",
		"# Avg bus bandwidth    : ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(barrier)") {
		t.Errorf("the footer averages a barrier's bandwidth:\n%s", out)
	}
	// A new op header each time the op changes.
	if got := strings.Count(out, "#wrong"); got != 5 {
		t.Errorf("%d column headers, want 5 (allreduce, broadcast, reducescatter, allreduce, barrier):\n%s", got, out)
	}
}

func TestFormatMicros(t *testing.T) {
	tests := map[float64]string{0.5: "0.50", 12.345: "12.35", 99.994: "99.99", 100: "100.0", 9999.94: "9999.9", 10000: "10000", 123456.7: "123457"}
	for in, want := range tests {
		if got := FormatMicros(in); got != want {
			t.Errorf("FormatMicros(%g) = %q, want %q", in, got, want)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rs := sampleResults()
	metas := []Meta{{Series: "a", Ranks: 2, DType: "float32"}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, metas, rs); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"time_us"`, `"min_us"`, `"median_us"`, `"busbw_gbps"`, `"op": "allreduce"`, `"skipped": "not supported"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	rep, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tool != "commbench" || !reflect.DeepEqual(rep.Meta, metas) || !reflect.DeepEqual(rep.Results, rs) {
		t.Errorf("JSON round trip = %+v", rep)
	}
	buf.Reset()
	if err := WriteJSON(&buf, nil, nil); err != nil || !strings.Contains(buf.String(), `"results": []`) {
		t.Errorf("empty JSON = %s, %v", buf.String(), err)
	}
}

func TestCSV(t *testing.T) {
	rs := sampleResults()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, rs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(rs)+1 || !reflect.DeepEqual(recs[0], csvHeader) {
		t.Fatalf("CSV has %d records, header %v", len(recs), recs[0])
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	row := recs[2] // allreduce 1 MiB
	if row[col["op"]] != "allreduce" || row[col["size_bytes"]] != "1048576" || row[col["count"]] != "262144" ||
		row[col["time_us"]] != "250" || row[col["wrong"]] != "0" || row[col["series"]] != "a" {
		t.Errorf("CSV row = %v", row)
	}
	if recs[5][col["skipped"]] != "not supported" || recs[4][col["wrong"]] != "-1" {
		t.Errorf("CSV rows = %v / %v", recs[4], recs[5])
	}
}
