package profile

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Arrival is when one rank entered one collective. Every member of a
// communicator gives a collective the same (Comm, Seq), which is how the
// analysis matches the ranks' arrivals.
type Arrival struct {
	Comm  uint64
	Seq   uint64
	Name  string
	Bytes int64
	Start int64 // Unix nanoseconds on the rank's own clock
}

// RankArrivals is one rank's contribution to the straggler analysis.
type RankArrivals struct {
	Rank int    // world rank
	Host string // host name, to tell which ranks share a clock
	// Offset is the rank's clock minus the reference rank's, as estimated
	// by the analysing rank (EstimateOffset); arrivals are shifted by it.
	Offset   time.Duration
	Arrivals []Arrival
}

// ArrivalsOf extracts the arrivals of the collectives among recs (Send and
// Recv, which have no sequence number, are left out).
func ArrivalsOf(recs []Record) []Arrival {
	var out []Arrival
	for _, r := range recs {
		if r.Seq == 0 {
			continue
		}
		out = append(out, Arrival{Comm: r.Comm, Seq: r.Seq, Name: r.Label(), Bytes: r.Bytes, Start: r.Start.UnixNano()})
	}
	return out
}

// StragglerRow is the arrival skew of the collectives of one name and size.
type StragglerRow struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Count int    `json:"count"`
	// Skews (last arrival minus first) in milliseconds: sum, TrimMean, max.
	TotalSkew float64 `json:"total_skew_ms"`
	AvgSkew   float64 `json:"avg_skew_ms"`
	MaxSkew   float64 `json:"max_skew_ms"`
	// Last is the world rank that arrived last most often, LastCount how
	// often it did.
	Last      int `json:"last"`
	LastCount int `json:"last_count"`
}

// RankLateness is how late one rank was, over every analysed collective it
// joined: its arrival minus the first rank's.
type RankLateness struct {
	Rank      int     `json:"rank"`
	Ops       int     `json:"ops"`
	LastCount int     `json:"last_count"`
	TotalLate float64 `json:"total_late_ms"`
	AvgLate   float64 `json:"avg_late_ms"`
	// Expected is how often the rank would come last by chance: the sum
	// over its collectives of 1/n for n ranks taking part. PValue is the
	// chance of coming last LastCount times or more by chance (LastPValue).
	Expected float64 `json:"expected_last"`
	PValue   float64 `json:"p_value"`
}

// The straggler test: a rank is named only when it came last at least
// StragglerMinLast times and its LastPValue is below StragglerAlpha
// divided by the number of ranks tested (Bonferroni: the chance that any
// of N punctual ranks is named stays under StragglerAlpha).
const (
	StragglerAlpha   = 0.001
	StragglerMinLast = 5
)

// LastPValue is the one-sided p-value of a rank coming last k times or
// more in n collectives when it would by chance with probability p in
// each: the binomial upper tail P(X >= k), X ~ B(n, p). When the
// collectives had different numbers of ranks, p is the mean chance; by
// Hoeffding's inequality for sums of unequal Bernoulli trials the tail
// computed so is never smaller than the true one for k >= n*p + 1, so the
// test stays conservative.
func LastPValue(k, n int, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n:
		return 0
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	lgn, _ := math.Lgamma(float64(n) + 1)
	sum := 0.0
	for j := k; j <= n; j++ {
		lgj, _ := math.Lgamma(float64(j) + 1)
		lgr, _ := math.Lgamma(float64(n-j) + 1)
		term := math.Exp(lgn - lgj - lgr + float64(j)*lp + float64(n-j)*lq)
		sum += term
		if float64(j) > float64(n)*p && term < sum*1e-17 {
			break // past the mode the terms only shrink
		}
	}
	return min(sum, 1)
}

// significant says whether l is a straggler among tested ranks.
func (l RankLateness) significant(tested int) bool {
	return l.LastCount >= StragglerMinLast && l.PValue < StragglerAlpha/float64(max(tested, 1))
}

// ClockOffset is the estimated clock offset of a rank from the reference.
type ClockOffset struct {
	Rank        int           `json:"rank"`
	Offset      time.Duration `json:"offset_ns"`
	Uncertainty time.Duration `json:"uncertainty_ns"`
}

// StragglerReport is the result of AnalyzeArrivals.
type StragglerReport struct {
	// Ops is the number of collectives seen by two or more ranks.
	Ops   int            `json:"ops"`
	Rows  []StragglerRow `json:"rows"`
	Ranks []RankLateness `json:"ranks"`
	// Straggler is the world rank that came last significantly more often
	// than chance (see StragglerAlpha; of several, the one with the lowest
	// p-value, then the one later in total), -1 when none did.
	Straggler int `json:"straggler"`
	// MostLast is the world rank that came last most often (ties go to the
	// one later in total), significant or not; -1 when no collective was
	// analysed.
	MostLast int `json:"most_last"`
	// Offsets lists the clock offsets that were estimated (none when every
	// rank shares a host, or with ClockSyncOff).
	Offsets []ClockOffset `json:"offsets,omitempty"`
}

// AnalyzeArrivals matches the ranks' arrivals by (Comm, Seq), shifts each
// rank's by its Offset, and reports per name and size the skew between the
// first and the last arrival and which rank was last. A collective needs
// arrivals from two ranks or more to count. The name and size of a
// collective are those of its lowest-ranked participant.
func AnalyzeArrivals(ranks []RankArrivals) StragglerReport {
	type key struct{ comm, seq uint64 }
	type arrival struct {
		rank int
		t    int64
	}
	type op struct {
		name    string
		bytes   int64
		lowest  int
		arrived []arrival
	}
	ops := map[key]*op{}
	var order []key
	for _, ra := range ranks {
		for _, a := range ra.Arrivals {
			k := key{a.Comm, a.Seq}
			o := ops[k]
			if o == nil {
				o = &op{name: a.Name, bytes: a.Bytes, lowest: ra.Rank}
				ops[k] = o
				order = append(order, k)
			} else if ra.Rank < o.lowest {
				o.name, o.bytes, o.lowest = a.Name, a.Bytes, ra.Rank
			}
			o.arrived = append(o.arrived, arrival{ra.Rank, a.Start - int64(ra.Offset)})
		}
	}
	type group struct {
		skews []float64
		max   float64
		last  map[int]int
	}
	type gkey struct {
		name  string
		bytes int64
	}
	groups := map[gkey]*group{}
	var names []string
	sizes := map[string][]int64{}
	late := map[int]*RankLateness{}
	rep := StragglerReport{Straggler: -1, MostLast: -1}
	for _, k := range order {
		o := ops[k]
		if len(o.arrived) < 2 {
			continue
		}
		rep.Ops++
		first, last := o.arrived[0], o.arrived[0]
		for _, a := range o.arrived[1:] {
			if a.t < first.t {
				first = a
			}
			if a.t > last.t {
				last = a
			}
		}
		gk := gkey{o.name, o.bytes}
		g := groups[gk]
		if g == nil {
			if _, seen := sizes[o.name]; !seen {
				names = append(names, o.name)
			}
			sizes[o.name] = append(sizes[o.name], o.bytes)
			g = &group{last: map[int]int{}}
			groups[gk] = g
		}
		skew := float64(last.t-first.t) / 1e6
		g.skews = append(g.skews, skew)
		g.max = max(g.max, skew)
		g.last[last.rank]++
		for _, a := range o.arrived {
			l := late[a.rank]
			if l == nil {
				l = &RankLateness{Rank: a.rank}
				late[a.rank] = l
			}
			l.Ops++
			l.Expected += 1 / float64(len(o.arrived))
			l.TotalLate += float64(a.t-first.t) / 1e6
			if a.rank == last.rank {
				l.LastCount++
			}
		}
	}
	for _, name := range names {
		ss := sizes[name]
		sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
		for _, b := range ss {
			g := groups[gkey{name, b}]
			row := StragglerRow{Name: name, Bytes: b, Count: len(g.skews), AvgSkew: TrimMean(g.skews), MaxSkew: g.max, Last: -1}
			for _, s := range g.skews {
				row.TotalSkew += s
			}
			for r, n := range g.last {
				if n > row.LastCount || n == row.LastCount && r < row.Last {
					row.Last, row.LastCount = r, n
				}
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	for _, l := range late {
		l.AvgLate = l.TotalLate / float64(l.Ops)
		l.PValue = LastPValue(l.LastCount, l.Ops, l.Expected/float64(l.Ops))
		rep.Ranks = append(rep.Ranks, *l)
	}
	sort.Slice(rep.Ranks, func(i, j int) bool { return rep.Ranks[i].Rank < rep.Ranks[j].Rank })
	most, strag := -1, -1
	for i, l := range rep.Ranks {
		if l.LastCount == 0 {
			continue
		}
		if most < 0 || l.LastCount > rep.Ranks[most].LastCount ||
			l.LastCount == rep.Ranks[most].LastCount && l.TotalLate > rep.Ranks[most].TotalLate {
			most = i
		}
		if !l.significant(len(rep.Ranks)) {
			continue
		}
		if strag < 0 || l.PValue < rep.Ranks[strag].PValue ||
			l.PValue == rep.Ranks[strag].PValue && l.TotalLate > rep.Ranks[strag].TotalLate {
			strag = i
		}
	}
	if most >= 0 {
		rep.MostLast = rep.Ranks[most].Rank
	}
	if strag >= 0 {
		rep.Straggler = rep.Ranks[strag].Rank
	}
	return rep
}

// WriteStraggler prints the report: a table per name and size in
// WriteSummary's layout, a table per rank, a line naming the straggler and
// the clock offsets used.
func WriteStraggler(w io.Writer, rep StragglerReport) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Straggler analysis: %d collectives seen by two or more ranks; skew = last arrival - first arrival\n", rep.Ops)
	fmt.Fprintf(b, "%-20s%-20s%-20s%-20s%-20s%-20s%-20s\n", "Comm. Op", "Message Size", "Count",
		"Total skew(ms)", "Avg skew(ms)", "Max skew(ms)", "Last rank (times)")
	last := ""
	for i, r := range rep.Rows {
		if i == 0 || r.Name != last {
			b.WriteString(r.Name + "\n")
			last = r.Name
		}
		fmt.Fprintf(b, "%-20s%-20s%-20d%-20.2f%-20.2f%-20.2f%-20s\n", " ", ConvertSize(r.Bytes), r.Count,
			r.TotalSkew, r.AvgSkew, r.MaxSkew, fmt.Sprintf("%d (%d/%d)", r.Last, r.LastCount, r.Count))
	}
	fmt.Fprintf(b, "%-20s%-20s%-20s%-20s%-20s%-20s%-20s\n", "Rank", "Ops", "Last (times)", "Total late(ms)", "Avg late(ms)",
		"Last by chance", "p-value")
	for _, l := range rep.Ranks {
		fmt.Fprintf(b, "%-20d%-20d%-20d%-20.2f%-20.2f%-20.1f%-20.2g\n", l.Rank, l.Ops, l.LastCount, l.TotalLate, l.AvgLate,
			l.Expected, l.PValue)
	}
	rule := fmt.Sprintf("a rank is named when it came last at least %d times and a one-sided binomial test gives p < %g/%d ranks",
		StragglerMinLast, StragglerAlpha, len(rep.Ranks))
	switch {
	case rep.Ops == 0:
		b.WriteString("no straggler: no collective was seen by two or more ranks\n")
	case rep.Straggler >= 0:
		l := rep.rank(rep.Straggler)
		fmt.Fprintf(b, "straggler: rank %d came last in %d of %d collectives (%.0f%%; %s; p = %.2g), %.2f ms after the first rank on average (%s)\n",
			l.Rank, l.LastCount, l.Ops, pct(l.LastCount, l.Ops), l.expected(), l.PValue, l.AvgLate, rule)
	default:
		l := rep.rank(rep.MostLast)
		fmt.Fprintf(b, "no straggler: no rank came last significantly more often than chance; most often rank %d, in %d of %d collectives (%.0f%%; %s; p = %.2g) (%s)\n",
			l.Rank, l.LastCount, l.Ops, pct(l.LastCount, l.Ops), l.expected(), l.PValue, rule)
	}
	if len(rep.Offsets) > 0 {
		b.WriteString("clock offsets from rank 0 (ms):")
		for _, o := range rep.Offsets {
			fmt.Fprintf(b, " rank %d %+.3f (±%.3f)", o.Rank, ms(o.Offset), ms(o.Uncertainty))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (rep *StragglerReport) rank(r int) RankLateness {
	for _, l := range rep.Ranks {
		if l.Rank == r {
			return l
		}
	}
	return RankLateness{Rank: r}
}

func pct(k, n int) float64 { return 100 * float64(k) / float64(max(n, 1)) }

// expected says how often l would come last by chance: "expected 1/4 =
// 25%" when each of its collectives had 4 ranks, else the mean chance.
func (l RankLateness) expected() string {
	if l.Ops == 0 {
		return "expected 0%"
	}
	p := l.Expected / float64(l.Ops)
	if n := math.Round(1 / p); n >= 2 && math.Abs(n*l.Expected-float64(l.Ops)) < 1e-6 {
		return fmt.Sprintf("expected 1/%d = %.0f%% by chance", int(n), 100*p)
	}
	return fmt.Sprintf("expected %.0f%% by chance (1/n of each collective's n ranks)", 100*p)
}

// PingSample is one round trip of a clock exchange between a reference
// rank and a peer, in Unix nanoseconds: the reference sends at T0 (its
// clock), the peer receives at T1 and replies at T2 (its clock), the
// reference receives at T3.
type PingSample struct{ T0, T1, T2, T3 int64 }

// EstimateOffset estimates the peer's clock minus the reference's from
// round trips, as NTP does, using the sample with the shortest round trip:
// offset = ((T1-T0) + (T2-T3))/2, wrong by at most half that round trip
// (the uncertainty), assuming the clocks do not drift meanwhile. ok is
// false without samples.
func EstimateOffset(samples []PingSample) (offset, uncertainty time.Duration, ok bool) {
	best := int64(-1)
	for _, s := range samples {
		delay := (s.T3 - s.T0) - (s.T2 - s.T1)
		if delay < 0 {
			delay = 0
		}
		if best < 0 || delay < best {
			best = delay
			offset = time.Duration(((s.T1 - s.T0) + (s.T2 - s.T3)) / 2)
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return offset, time.Duration(best / 2), true
}
