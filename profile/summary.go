package profile

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ConvertSize formats a byte count as DeepSpeed's convert_size does: "0B"
// for 0, else Python's "%s %s" % (round(S/1024**i, 2), unit) with i =
// floor(log(S, 1024)) computed in floating point. So 2048 is "2.0 KB",
// 1048575 is "1024.0 KB" and 1024**5-1 is "1.0 PB", as in DeepSpeed.
func ConvertSize(n int64) string {
	if n <= 0 {
		if n == 0 {
			return "0B"
		}
		return strconv.FormatInt(n, 10) + " B"
	}
	units := [...]string{"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}
	i := int(math.Floor(math.Log(float64(n)) / math.Log(1024)))
	i = min(max(i, 0), len(units)-1)
	return pyRound2(float64(n)/math.Pow(1024, float64(i))) + " " + units[i]
}

// pyRound2 prints str(round(x, 2)) as Python does: x rounded to two
// decimals (correctly, ties of the exact binary value to even), then the
// shortest representation of that float, with ".0" when it is integral.
func pyRound2(x float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	s := strconv.FormatFloat(r, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}

// TrimCount is how many values DeepSpeed's trim_mean(x, 0.1) drops from
// each end of n values: Python's round(0.1*n), which rounds halves to even
// (n = 5 drops 0, 15 drops 2 since 0.1*15 is 1.5000000000000002, 25 drops 2).
func TrimCount(n int) int {
	return int(math.RoundToEven(0.1 * float64(n)))
}

// TrimMean is DeepSpeed's trim_mean(x, 0.1): the mean of x without its
// TrimCount(len(x)) smallest and largest values; 0 for no values. Unlike
// DeepSpeed it leaves x in its order (it sorts a copy).
func TrimMean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	k := TrimCount(len(s))
	s = s[k : len(s)-k]
	if len(s) == 0 {
		return 0
	}
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return sum / float64(len(s))
}

// Row is one line of the summary: the records of one name and message size.
type Row struct {
	Name string `json:"name"`
	// Parent is the object collective these records were pieces of (see
	// Record.Parent), "" for top-level rows.
	Parent string `json:"parent,omitempty"`
	Bytes  int64  `json:"bytes"`
	Count  int    `json:"count"`
	// TotalLatency is the sum of the latencies, AvgLatency their TrimMean,
	// in milliseconds.
	TotalLatency float64 `json:"total_latency_ms"`
	AvgLatency   float64 `json:"avg_latency_ms"`
	// AlgBW and BusBW are TrimMeans of the records' bandwidths, in the
	// layout's units (GB/s, or DeepSpeed's Gbps with its tput as AlgBW).
	AlgBW float64 `json:"algbw"`
	BusBW float64 `json:"busbw"`
}

// Summarize groups the successful records by name (in the order each name
// first appears) and message size (ascending), as DeepSpeed's log_all does.
// The pieces of object collectives (Record.Parent) are grouped apart, by
// parent, name and size, and their rows follow their parent's.
func Summarize(recs []Record, layout Layout) []Row {
	type group struct{ parent, name string }
	type key struct {
		group
		bytes int64
	}
	var tops []string
	topSeen := map[string]bool{}
	children := map[string][]string{}
	sizes := map[group][]int64{}
	lists := map[key]*struct{ lat, alg, bus []float64 }{}
	for _, r := range recs {
		if r.Err != "" {
			continue
		}
		g := group{r.Parent, r.Name}
		k := key{g, r.Bytes}
		l := lists[k]
		if l == nil {
			if _, seen := sizes[g]; !seen {
				top := cmp.Or(r.Parent, r.Name)
				if !topSeen[top] {
					topSeen[top] = true
					tops = append(tops, top)
				}
				if r.Parent != "" {
					children[r.Parent] = append(children[r.Parent], r.Name)
				}
			}
			sizes[g] = append(sizes[g], r.Bytes)
			l = &struct{ lat, alg, bus []float64 }{}
			lists[k] = l
		}
		alg, bus := r.AlgBW, r.BusBW
		if layout == LayoutDeepSpeed {
			alg, bus = DeepSpeedBandwidth(r)
		}
		l.lat = append(l.lat, ms(r.Latency))
		l.alg = append(l.alg, alg)
		l.bus = append(l.bus, bus)
	}
	var rows []Row
	add := func(g group) {
		ss := sizes[g]
		slices.Sort(ss)
		for _, b := range ss {
			l := lists[key{g, b}]
			total := 0.0
			for _, v := range l.lat {
				total += v
			}
			rows = append(rows, Row{
				Name: g.name, Parent: g.parent, Bytes: b, Count: len(l.lat), TotalLatency: total,
				AvgLatency: TrimMean(l.lat), AlgBW: TrimMean(l.alg), BusBW: TrimMean(l.bus),
			})
		}
	}
	for _, top := range tops {
		add(group{"", top})
		for _, child := range children[top] {
			add(group{top, child})
		}
	}
	return rows
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteSummary prints rows as DeepSpeed's log_summary does: seven
// left-aligned columns of 20 characters, a line with each record name, then
// one line per message size with the first column blank. The pieces of an
// object collective follow it, each name on a line "  > name". The bandwidth
// titles are "algbw_avg (GB/s)" and "busbw_avg (GB/s)", or DeepSpeed's
// "tput_avg (Gbps)" and "busbw_avg (Gbps)" in LayoutDeepSpeed.
func WriteSummary(w io.Writer, rows []Row, layout Layout) error {
	alg := "algbw_avg (GB/s)"
	if layout == LayoutDeepSpeed {
		alg = "tput_avg (Gbps)"
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "%-20s%-20s%-20s%-20s%-20s%-20s%-20s\n", "Comm. Op", "Message Size", "Count",
		"Total Latency(ms)", "Avg Latency(ms)", alg, "busbw_avg ("+layout.units()+")")
	var last, lastTop string
	for i, r := range rows {
		if top := cmp.Or(r.Parent, r.Name); i == 0 || top != lastTop {
			if r.Parent != "" {
				b.WriteString(r.Parent + "\n") // pieces whose parent has no row
			}
			lastTop = top
		}
		if i == 0 || r.Label() != last {
			if r.Parent != "" {
				b.WriteString("  > " + r.Name + "\n")
			} else {
				b.WriteString(r.Name + "\n")
			}
			last = r.Label()
		}
		fmt.Fprintf(b, "%-20s%-20s%-20d%-20.2f%-20.2f%-20.2f%-20.2f\n", " ", ConvertSize(r.Bytes), r.Count,
			r.TotalLatency, r.AvgLatency, r.AlgBW, r.BusBW)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatVerbose is the line verbose mode prints for a record, DeepSpeed's
// "comm op: <name> | time (ms): <t> | msg size: <size> | algbw (<u>): <a> |
// busbw (<u>): <b>".
func FormatVerbose(r Record, layout Layout) string {
	alg, bus := r.AlgBW, r.BusBW
	if layout == LayoutDeepSpeed {
		alg, bus = DeepSpeedBandwidth(r)
	}
	u := layout.units()
	return fmt.Sprintf("comm op: %s | time (ms): %.2f | msg size: %s | algbw (%s): %.2f | busbw (%s): %.2f",
		r.Label(), ms(r.Latency), ConvertSize(r.Bytes), u, alg, u, bus)
}

// Report is the JSON form of one rank's log: every record and the summary.
type Report struct {
	Rank      int      `json:"rank"`
	WorldRank int      `json:"world_rank"`
	Units     string   `json:"units"`
	Records   []Record `json:"records"`
	Summary   []Row    `json:"summary"`
}

// NewReport builds the Report of one rank's records.
func NewReport(rank, worldRank int, recs []Record, layout Layout) Report {
	if recs == nil {
		recs = []Record{}
	}
	rows := Summarize(recs, layout)
	if rows == nil {
		rows = []Row{}
	}
	return Report{Rank: rank, WorldRank: worldRank, Units: layout.units(), Records: recs, Summary: rows}
}

// WriteJSON writes rep as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// Label is the row's name as Record.Label gives it.
func (r Row) Label() string { return Record{Name: r.Name, Parent: r.Parent}.Label() }
