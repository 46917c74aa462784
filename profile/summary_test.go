package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// The expected strings were printed by DeepSpeed's convert_size under
// Python 3.11.
func TestConvertSize(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {1, "1.0 B"}, {8, "8.0 B"}, {1000, "1000.0 B"}, {1023, "1023.0 B"},
		{1024, "1.0 KB"}, {1025, "1.0 KB"}, {1536, "1.5 KB"}, {2048, "2.0 KB"},
		{1048575, "1024.0 KB"}, {1048576, "1.0 MB"}, {4194309, "4.0 MB"},
		{123456789, "117.74 MB"}, {711834664, "678.86 MB"},
		{1073741823, "1024.0 MB"}, {1 << 30, "1.0 GB"}, {1<<40 - 1, "1024.0 GB"},
		// log(1024**5 - 1, 1024) rounds to 5.0 in floating point.
		{1<<50 - 1, "1.0 PB"}, {3 << 50, "3.0 PB"}, {1 << 60, "1.0 EB"}, {math.MaxInt64, "8.0 EB"},
	}
	for _, c := range cases {
		if got := ConvertSize(c.n); got != c.want {
			t.Errorf("ConvertSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestTrimCount(t *testing.T) {
	// Python: [round(0.1*n) for n in range(1, 60)]
	want := []int{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
		3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6}
	for i, w := range want {
		if got := TrimCount(i + 1); got != w {
			t.Errorf("TrimCount(%d) = %d, want %d", i+1, got, w)
		}
	}
	// The cases the reference calls out: 5 -> 0, 15 -> 2, 25 -> 2.
	for n, w := range map[int]int{5: 0, 15: 2, 25: 2} {
		if got := TrimCount(n); got != w {
			t.Errorf("TrimCount(%d) = %d, want %d", n, got, w)
		}
	}
}

// naiveTrimMean is the reference: Python's trim_mean written out.
func naiveTrimMean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := append([]float64(nil), x...)
	for i := range s { // insertion sort
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	k := int(math.RoundToEven(0.1 * float64(len(s))))
	sum := 0.0
	for _, v := range s[k : len(s)-k] {
		sum += v
	}
	return sum / float64(len(s)-2*k)
}

func TestTrimMean(t *testing.T) {
	seq := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64((i * 7) % n) // a permutation of 0..n-1
		}
		return x
	}
	// 5 values: nothing dropped. 15 and 25: two dropped from each end.
	five := []float64{100, 1, 2, 3, 4}
	if got := TrimMean(five); got != 22 {
		t.Errorf("TrimMean(%v) = %v, want 22 (nothing trimmed)", five, got)
	}
	fifteen := seq(15) // 0..14 -> drop 0,1 and 13,14 -> mean of 2..12 = 7
	fifteen[0] = 1000  // an outlier that must be trimmed
	if got, want := TrimMean(fifteen), naiveTrimMean(fifteen); got != want {
		t.Errorf("TrimMean(15 values) = %v, want %v", got, want)
	}
	x25 := seq(25)
	x25[3] = -1e9
	x25[4] = 1e9
	if got := TrimMean(x25); math.Abs(got-naiveTrimMean(x25)) > 1e-9 || math.Abs(got) > 100 {
		t.Errorf("TrimMean(25 values with outliers) = %v, want %v", got, naiveTrimMean(x25))
	}
	if got := TrimMean(nil); got != 0 {
		t.Errorf("TrimMean(nil) = %v, want 0", got)
	}
	// It must not reorder its argument (DeepSpeed's sorts in place).
	orig := []float64{3, 1, 2}
	TrimMean(orig)
	if orig[0] != 3 || orig[1] != 1 || orig[2] != 2 {
		t.Errorf("TrimMean reordered its input: %v", orig)
	}
	for n := 1; n < 60; n++ {
		x := seq(n)
		if got, want := TrimMean(x), naiveTrimMean(x); math.Abs(got-want) > 1e-12 {
			t.Errorf("TrimMean(seq(%d)) = %v, want %v", n, got, want)
		}
	}
}

func TestBandwidthFormulas(t *testing.T) {
	const S = 1_000_000
	sec := time.Second / 1000 // 1 ms: S/t = 1 GB/s
	cases := []struct {
		op           string
		send, recv   int64
		all          int64
		n            int
		wantS, wantT int64
		alg, bus     float64 // GB/s
		dsTput, dsBB float64 // Gbps
	}{
		{OpAllReduce, S, S, 0, 4, S, S, 1, 1.5, 16, 12},
		{OpAllReduce, S, S, 0, 1, S, S, 1, 0, 16, 0},
		{OpBroadcast, S, S, 0, 4, S, S, 1, 1, 8, 8},
		{OpReduce, S, S, 0, 4, S, S, 1, 1, 8, 8},
		{OpAllGather, S, 4 * S, 4 * S, 4, S, 4 * S, 4, 3, 32, 24},
		{OpReduceScatter, 4 * S, S, 4 * S, 4, 4 * S, 4 * S, 4, 3, 32, 24},
		{OpAllToAll, S, S, 0, 4, S, S, 1, 0.75, 8, 6},
		{OpGather, S, 4 * S, 4 * S, 4, S, 4 * S, 4, 3, 8, 8},
		{OpScatter, 4 * S, S, 4 * S, 4, S, 4 * S, 4, 3, 8, 8},
		{OpSend, S, 0, 0, 4, S, S, 1, 1, 8, 8},
		{OpRecv, 0, S, 0, 4, S, S, 1, 1, 8, 8},
		{OpBarrier, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0},
		{"no_such_op", S, S, 0, 4, S, S, 1, 1, 8, 8},
	}
	for _, c := range cases {
		s, tot := MessageSizes(c.op, c.send, c.recv, c.all)
		if s != c.wantS || tot != c.wantT {
			t.Errorf("MessageSizes(%s) = %d, %d, want %d, %d", c.op, s, tot, c.wantS, c.wantT)
		}
		alg, bus := Bandwidth(c.op, tot, c.n, sec)
		if !near(alg, c.alg) || !near(bus, c.bus) {
			t.Errorf("Bandwidth(%s, n=%d) = %v, %v GB/s, want %v, %v", c.op, c.n, alg, bus, c.alg, c.bus)
		}
		r := Record{Op: c.op, Bytes: s, TotalBytes: tot, CommSize: c.n, Latency: sec}
		tp, bb := DeepSpeedBandwidth(r)
		if !near(tp, c.dsTput) || !near(bb, c.dsBB) {
			t.Errorf("DeepSpeedBandwidth(%s, n=%d) = %v, %v Gbps, want %v, %v", c.op, c.n, tp, bb, c.dsTput, c.dsBB)
		}
	}
	if a, b := Bandwidth(OpAllReduce, S, 4, 0); a != 0 || b != 0 {
		t.Errorf("Bandwidth with t = 0 = %v, %v, want zeros", a, b)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func rec(name string, bytes int64, lat time.Duration) Record {
	alg, bus := Bandwidth(OpAllReduce, bytes, 2, lat)
	return Record{Op: OpAllReduce, Name: name, Bytes: bytes, TotalBytes: bytes, CommSize: 2,
		Latency: lat, AlgBW: alg, BusBW: bus, Root: -1, Peer: -1}
}

func TestSummarizeAndTable(t *testing.T) {
	recs := []Record{
		rec("grads", 2048, 2*time.Millisecond),
		rec("all_reduce", 8, time.Millisecond),
		rec("grads", 1024, time.Millisecond),
		rec("grads", 2048, 4*time.Millisecond),
		{Op: OpAllReduce, Name: "grads", Bytes: 2048, Latency: time.Hour, Err: "boom"}, // failed: left out
	}
	rows := Summarize(recs, LayoutGBs)
	if len(rows) != 3 {
		t.Fatalf("Summarize: %d rows, want 3: %+v", len(rows), rows)
	}
	// Names in first-appearance order, sizes ascending.
	if rows[0].Name != "grads" || rows[0].Bytes != 1024 || rows[1].Bytes != 2048 || rows[2].Name != "all_reduce" {
		t.Errorf("Summarize order: %+v", rows)
	}
	if rows[1].Count != 2 || rows[1].TotalLatency != 6 || rows[1].AvgLatency != 3 {
		t.Errorf("grads 2 KB row = %+v, want count 2, total 6 ms, avg 3 ms", rows[1])
	}
	// algbw of 2048 B in 2 ms and 4 ms: 1.024e-3 and 0.512e-3 GB/s.
	if !near(rows[1].AlgBW, (1.024e-3+0.512e-3)/2) || !near(rows[1].BusBW, rows[1].AlgBW) {
		t.Errorf("grads 2 KB bandwidths = %v, %v", rows[1].AlgBW, rows[1].BusBW)
	}
	var b bytes.Buffer
	if err := WriteSummary(&b, rows, LayoutGBs); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Comm. Op            Message Size        Count               Total Latency(ms)   Avg Latency(ms)     algbw_avg (GB/s)    busbw_avg (GB/s)    \n" +
		"grads\n" +
		"                    1.0 KB              1                   1.00                1.00                0.00                0.00                \n" +
		"                    2.0 KB              2                   6.00                3.00                0.00                0.00                \n" +
		"all_reduce\n" +
		"                    8.0 B               1                   1.00                1.00                0.00                0.00                \n"
	if b.String() != want {
		t.Errorf("WriteSummary:\n%s\nwant:\n%s", b.String(), want)
	}
	// DeepSpeed's layout: Gbps titles, all-reduce tput = 2S/t.
	ds := Summarize([]Record{rec("all_reduce", 1_000_000, time.Millisecond)}, LayoutDeepSpeed)
	if !near(ds[0].AlgBW, 16) || !near(ds[0].BusBW, 8) {
		t.Errorf("DeepSpeed layout row = %+v, want tput 16 Gbps, busbw 8 Gbps", ds[0])
	}
	b.Reset()
	if err := WriteSummary(&b, ds, LayoutDeepSpeed); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "tput_avg (Gbps)     busbw_avg (Gbps)") || !strings.Contains(b.String(), "16.00") {
		t.Errorf("DeepSpeed layout:\n%s", b.String())
	}
}

func TestFormatVerbose(t *testing.T) {
	r := rec("grads", 1_000_000, time.Millisecond)
	got := FormatVerbose(r, LayoutDeepSpeed)
	want := "comm op: grads | time (ms): 1.00 | msg size: 976.56 KB | algbw (Gbps): 16.00 | busbw (Gbps): 8.00"
	if got != want {
		t.Errorf("FormatVerbose = %q, want %q", got, want)
	}
	if got := FormatVerbose(r, LayoutGBs); !strings.Contains(got, "algbw (GB/s): 1.00 | busbw (GB/s): 1.00") {
		t.Errorf("FormatVerbose GB/s = %q", got)
	}
}

func TestWriteJSON(t *testing.T) {
	recs := []Record{rec("a", 8, time.Millisecond), rec("b", 16, 2*time.Millisecond), rec("a", 8, time.Millisecond)}
	recs[0].Start = time.Unix(1700000000, 123456789)
	var b bytes.Buffer
	if err := WriteJSON(&b, NewReport(1, 3, recs, LayoutGBs)); err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, b.String())
	}
	if len(got.Records) != 3 || len(got.Summary) != 2 || got.Rank != 1 || got.WorldRank != 3 || got.Units != "GB/s" {
		t.Errorf("JSON round trip = %+v", got)
	}
	if !got.Records[0].Start.Equal(recs[0].Start) || got.Records[1].Latency != 2*time.Millisecond {
		t.Errorf("JSON lost times: %+v", got.Records[:2])
	}
	b.Reset()
	if err := WriteJSON(&b, NewReport(0, 0, nil, LayoutGBs)); err != nil || !strings.Contains(b.String(), `"records": []`) {
		t.Errorf("empty report = %s, %v", b.String(), err)
	}
}

func ExampleConvertSize() {
	for _, n := range []int64{0, 8, 2048, 1048575, 711834664} {
		fmt.Println(ConvertSize(n))
	}
	// Output:
	// 0B
	// 8.0 B
	// 2.0 KB
	// 1024.0 KB
	// 678.86 MB
}

func ExampleTrimMean() {
	// Fifteen latencies: round(0.1*15) = 2 are dropped from each end.
	lat := []float64{9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 50}
	fmt.Println(TrimCount(len(lat)), TrimMean(lat))
	// Output: 2 1
}
