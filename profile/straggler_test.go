package profile

import (
	"bytes"
	"fmt"
	"math"
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
	// Rank 3 was last in all 4 of its collectives: 1/4 by chance each,
	// p = 1/256, too few to name it.
	if rep.Straggler != -1 || rep.MostLast != 3 {
		t.Errorf("Straggler, MostLast = %d, %d, want -1 (4 times is too few to tell), 3", rep.Straggler, rep.MostLast)
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
	for _, want := range []string{"no straggler: no rank came last significantly more often than chance; most often rank 3, in 4 of 4 collectives (100%; expected 1/4 = 25% by chance; p = 0.0039)",
		"3 (3/4)", "Last rank (times)",
		"rank 2 +1000.000 (±0.001)"} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteStraggler output lacks %q:\n%s", want, out)
		}
	}
	if rep := AnalyzeArrivals(nil); rep.Straggler != -1 || rep.Ops != 0 {
		t.Errorf("AnalyzeArrivals(nil) = %+v", rep)
	}
	b.Reset()
	if err := WriteStraggler(&b, AnalyzeArrivals(nil)); err != nil || !strings.Contains(b.String(), "no straggler: no collective was seen") {
		t.Errorf("WriteStraggler of no collectives: %v\n%s", err, b.String())
	}
}

// lastIn returns the arrivals of ranks world ranks in ops collectives in
// which rank slow comes last k times and the others take turns at the
// other ones.
func lastIn(ranks, ops, slow, k int) []RankArrivals {
	out := make([]RankArrivals, ranks)
	others := 0
	for r := range out {
		out[r].Rank = r
	}
	for seq := range ops {
		last := slow
		if seq >= k {
			last = others % ranks
			if last == slow {
				others++
				last = others % ranks
			}
			others++
		}
		for r := range out {
			start := int64(seq)*1e9 + int64(r)
			if r == last {
				start += 1e6
			}
			out[r].Arrivals = append(out[r].Arrivals, Arrival{Comm: 1, Seq: uint64(seq + 1), Name: "all_reduce", Bytes: 8, Start: start})
		}
	}
	return out
}

func TestStragglerSignificance(t *testing.T) {
	for _, tc := range []struct {
		ranks, ops, last int // rank 1 comes last in last of ops collectives
		named            bool
	}{
		{4, 198, 53, false},   // the case: 27% against 25% is chance (p = 0.31)
		{4, 198, 65, false},   // 33%: p = 0.008, not below 0.001/4
		{4, 198, 80, true},    // 40%: p = 1.4e-6
		{4, 198, 198, true},   // every time
		{4, 4, 4, false},      // fewer than StragglerMinLast
		{4, 5, 5, false},      // (1/4)^5 = 9.8e-4, not below 0.001/4
		{4, 8, 8, true},       // (1/4)^8 = 1.5e-5
		{2, 10, 10, false},    // (1/2)^10 = 9.8e-4, not below 0.001/2
		{2, 12, 12, true},     // (1/2)^12 = 2.4e-4
		{8, 5, 5, true},       // (1/8)^5 = 3.1e-5 < 0.001/8
		{8, 400, 50, false},   // exactly the expected 1/8
		{16, 1000, 62, false}, // the expected 1/16
	} {
		rep := AnalyzeArrivals(lastIn(tc.ranks, tc.ops, 1, tc.last))
		l := rep.rank(1)
		if l.LastCount != tc.last || l.Ops != tc.ops {
			t.Fatalf("%+v: rank 1 came last %d times in %d ops", tc, l.LastCount, l.Ops)
		}
		named := rep.Straggler == 1
		if named != tc.named || !named && rep.Straggler != -1 {
			t.Errorf("%d ranks, last in %d of %d: Straggler = %d (p = %.3g), want named %v", tc.ranks, tc.last, tc.ops, rep.Straggler, l.PValue, tc.named)
		}
		var b bytes.Buffer
		if err := WriteStraggler(&b, rep); err != nil {
			t.Fatal(err)
		}
		want := "no straggler: "
		if tc.named {
			want = "straggler: rank 1 came last in "
		}
		expect := fmt.Sprintf("expected 1/%d = %.0f%% by chance", tc.ranks, 100/float64(tc.ranks))
		if out := b.String(); !strings.Contains(out, "\n"+want) || !strings.Contains(out, expect) || !strings.Contains(out, "p < 0.001/") {
			t.Errorf("%+v: output lacks %q or %q or the rule:\n%s", tc, want, expect, out)
		}
	}
}

func TestLastPValue(t *testing.T) {
	for _, tc := range []struct {
		k, n int
		p    float64
		want float64
	}{
		{0, 10, 0.25, 1},
		{1, 1, 0.25, 0.25},
		{2, 3, 0.5, 0.5},         // 3/8 + 1/8
		{5, 5, 0.25, 1.0 / 1024}, // (1/4)^5
		{3, 4, 0.25, 13.0 / 256}, // 4·3/256 + 1/256
		{11, 10, 0.5, 0},
		{53, 198, 0.25, 0.30763}, // the case
	} {
		got := LastPValue(tc.k, tc.n, tc.p)
		if math.Abs(got-tc.want) > 1e-3*tc.want+1e-12 {
			t.Errorf("LastPValue(%d, %d, %g) = %.6g, want %.6g", tc.k, tc.n, tc.p, got, tc.want)
		}
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
