package profile

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestAnalyzeArrivals(t *testing.T) {
	const ms = int64(time.Millisecond)
	base := int64(1_700_000_000) * int64(time.Second)
	// Four ranks, three all-reduces of 8 B and one broadcast of 1 KB on the
	// world (comm 1), and one all-reduce on a group of ranks 0 and 1 (comm
	// 9). Rank 3 is 5 ms late to everything it joins; rank 2's clock runs
	// 1 s ahead, which its offset corrects.
	arrivals := func(rank int, late, clock int64) RankArrivals {
		ra := RankArrivals{Rank: rank, Offset: time.Duration(clock)}
		for seq := uint64(1); seq <= 3; seq++ {
			ra.Arrivals = append(ra.Arrivals, Arrival{Comm: 1, Seq: seq, Name: "all_reduce", Bytes: 8,
				Start: base + int64(seq)*100*ms + late + clock + int64(rank)})
		}
		ra.Arrivals = append(ra.Arrivals, Arrival{Comm: 1, Seq: 4, Name: "broadcast", Bytes: 1024,
			Start: base + 400*ms + late + clock})
		return ra
	}
	ranks := []RankArrivals{arrivals(0, 0, 0), arrivals(1, 0, 0), arrivals(2, 0, int64(time.Second)), arrivals(3, 5*ms, 0)}
	ranks[0].Arrivals = append(ranks[0].Arrivals, Arrival{Comm: 9, Seq: 1, Name: "all_reduce", Bytes: 8, Start: base})
	ranks[1].Arrivals = append(ranks[1].Arrivals, Arrival{Comm: 9, Seq: 1, Name: "all_reduce", Bytes: 8, Start: base + 2*ms})
	// A collective only one rank saw does not count.
	ranks[0].Arrivals = append(ranks[0].Arrivals, Arrival{Comm: 5, Seq: 1, Name: "lonely", Bytes: 8, Start: base})

	rep := AnalyzeArrivals(ranks)
	if rep.Ops != 5 {
		t.Errorf("Ops = %d, want 5", rep.Ops)
	}
	if rep.Straggler != 3 {
		t.Errorf("Straggler = %d, want 3", rep.Straggler)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("Rows = %+v, want all_reduce 8 B and broadcast 1 KB", rep.Rows)
	}
	ar := rep.Rows[0]
	if ar.Name != "all_reduce" || ar.Count != 4 || ar.Last != 3 || ar.LastCount != 3 {
		t.Errorf("all_reduce row = %+v, want 4 ops, rank 3 last 3 times", ar)
	}
	if ar.MaxSkew < 4.99 || ar.MaxSkew > 5.01 {
		t.Errorf("all_reduce max skew = %v ms, want 5", ar.MaxSkew)
	}
	if bc := rep.Rows[1]; bc.Name != "broadcast" || bc.Count != 1 || bc.Last != 3 || bc.AvgSkew != 5 {
		t.Errorf("broadcast row = %+v", bc)
	}
	for _, l := range rep.Ranks {
		if l.Rank == 3 && (l.LastCount != 4 || l.Ops != 4 || l.AvgLate < 4.99) {
			t.Errorf("rank 3 lateness = %+v", l)
		}
		if l.Rank == 2 && l.AvgLate > 0.01 {
			t.Errorf("rank 2's clock offset was not applied: %+v", l)
		}
	}
	var b bytes.Buffer
	rep.Offsets = []ClockOffset{{Rank: 2, Offset: time.Second, Uncertainty: time.Microsecond}}
	if err := WriteStraggler(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"straggler: rank 3 came last in 4 of 5 collectives", "3 (3/4)", "Last rank (times)",
		"rank 2 +1000.000 (±0.001)"} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteStraggler output lacks %q:\n%s", want, out)
		}
	}
	if rep := AnalyzeArrivals(nil); rep.Straggler != -1 || rep.Ops != 0 {
		t.Errorf("AnalyzeArrivals(nil) = %+v", rep)
	}
}

func TestArrivalsOf(t *testing.T) {
	recs := []Record{
		{Op: OpSend, Name: "send", Start: time.Unix(1, 0)},
		{Op: OpAllReduce, Name: "x", Comm: 1, Seq: 7, Bytes: 8, Start: time.Unix(2, 5)},
	}
	a := ArrivalsOf(recs)
	if len(a) != 1 || a[0].Seq != 7 || a[0].Start != 2_000_000_005 || a[0].Name != "x" {
		t.Errorf("ArrivalsOf = %+v", a)
	}
}

func TestEstimateOffset(t *testing.T) {
	// The peer's clock is 3 ms ahead. Round trips of 1 ms (symmetric) and
	// 10 ms (asymmetric: 9 ms out, 1 ms back).
	const ms = int64(time.Millisecond)
	off := 3 * ms
	samples := []PingSample{
		{T0: 0, T1: 9*ms + off, T2: 9*ms + off, T3: 10 * ms},
		{T0: 100 * ms, T1: 100*ms + ms/2 + off, T2: 100*ms + ms/2 + off, T3: 101 * ms},
	}
	got, unc, ok := EstimateOffset(samples)
	if !ok || got != time.Duration(off) || unc != time.Millisecond/2 {
		t.Errorf("EstimateOffset = %v ± %v, %v, want 3ms ± 0.5ms", got, unc, ok)
	}
	if _, _, ok := EstimateOffset(nil); ok {
		t.Error("EstimateOffset(nil) ok")
	}
}
