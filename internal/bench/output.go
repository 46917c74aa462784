package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Meta describes a run, for the table header and the JSON output.
type Meta struct {
	Series    string `json:"series"`
	Backend   string `json:"backend"`
	Transport string `json:"transport"`
	Ranks     int    `json:"ranks"`
	DType     string `json:"type"`
	RedOp     string `json:"redop"`
	Warmup    int    `json:"warmup"`
	Iters     int    `json:"iters"`
	Budget    int64  `json:"budget_bytes,omitempty"`
	Check     bool   `json:"check"`
	Buffers   string `json:"buffers,omitempty"` // "shared" (--shared-buffers), "in place" (--in-place), both, or "" (ordinary)
	Algo      string `json:"algo,omitempty"`
	Host      string `json:"host,omitempty"`
	GoVersion string `json:"go,omitempty"`
	Started   string `json:"started,omitempty"`
	Command   string `json:"command,omitempty"`
	// MPIAlgos says what the best-of series tried (comparison mode).
	MPIAlgos string `json:"mpi_algorithms,omitempty"`
}

// TableWriter prints results as nccl-tests does: a header per op, then a
// row per size as each one completes, and the average bus bandwidth of
// each op at the end.
type TableWriter struct {
	w       io.Writer
	started bool
	op      Op
	busSum  map[Op]float64
	busN    map[Op]int
	order   []Op
}

// NewTableWriter returns a table writer on w.
func NewTableWriter(w io.Writer) *TableWriter {
	return &TableWriter{w: w, busSum: map[Op]float64{}, busN: map[Op]int{}}
}

// Header prints the run's description.
func (t *TableWriter) Header(m Meta) {
	check := "off"
	if m.Check {
		check = "on"
	}
	fmt.Fprintf(t.w, "# commbench: %s, %d ranks, backend %s, transport %s\n", m.Series, m.Ranks, m.Backend, m.Transport)
	fmt.Fprintf(t.w, "# type %s, redop %s, warm-up %d, iterations %d", m.DType, m.RedOp, m.Warmup, m.Iters)
	if m.Budget > 0 {
		fmt.Fprintf(t.w, " (at most %s per size)", HumanSize(m.Budget))
	}
	fmt.Fprintf(t.w, ", check %s", check)
	if m.Algo != "" {
		fmt.Fprintf(t.w, ", algorithms %s", m.Algo)
	}
	if m.Buffers != "" {
		fmt.Fprintf(t.w, ", buffers %s", m.Buffers)
	}
	fmt.Fprintln(t.w)
	fmt.Fprintln(t.w, "# time: timed loop / iterations, the slowest rank's; algbw = size/time;")
	fmt.Fprintln(t.w, "# busbw = algbw * factor (allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; others 1)")
}

const (
	tableHead = "#%11s %12s %8s %6s %5s %10s %8s %8s %7s"
	tableRow  = "%12d %12d %8s %6s %5d %10s %8.2f %8.2f %7s\n"
)

// Row prints one result, preceded by the column titles when the op
// changes.
func (t *TableWriter) Row(r Result) {
	if !t.started || r.Op != t.op {
		fmt.Fprintf(t.w, "#\n# %v\n", r.Op)
		for _, h := range [][]any{
			{"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"},
			{"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""},
		} {
			fmt.Fprintln(t.w, strings.TrimRight(fmt.Sprintf(tableHead, h...), " "))
		}
		t.started, t.op = true, r.Op
	}
	if r.Skip != "" {
		fmt.Fprintf(t.w, "%12d %12d %8s %6s %5d  skipped: %s\n", r.Bytes, r.Count, r.DType, r.RedOp, r.Root, r.Skip)
		return
	}
	wrong := "N/A"
	if r.Wrong >= 0 {
		wrong = strconv.FormatInt(r.Wrong, 10)
	}
	fmt.Fprintf(t.w, tableRow, r.Bytes, r.Count, r.DType, r.RedOp, r.Root, FormatMicros(r.TimeUS), r.AlgBW, r.BusBW, wrong)
	if _, ok := t.busN[r.Op]; !ok {
		t.order = append(t.order, r.Op)
	}
	t.busSum[r.Op] += r.BusBW
	t.busN[r.Op]++
}

// Footer prints the average bus bandwidth of each op and the number of
// wrong elements over the whole run.
func (t *TableWriter) Footer(results []Result) {
	var wrong int64
	checked := false
	for _, r := range results {
		if r.Wrong >= 0 {
			checked = true
			wrong += r.Wrong
		}
	}
	fmt.Fprintln(t.w, "#")
	if checked {
		fmt.Fprintf(t.w, "# Out of bounds values : %d %s\n", wrong, map[bool]string{true: "OK", false: "FAILED"}[wrong == 0])
	}
	for _, op := range t.order {
		if op == Barrier {
			continue
		}
		fmt.Fprintf(t.w, "# Avg bus bandwidth    : %.4f GB/s (%v)\n", t.busSum[op]/float64(t.busN[op]), op)
	}
	fmt.Fprintln(t.w, "#")
}

// FormatMicros prints a time in µs with nccl-tests' precision: two
// decimals below 100, one below 10000, none above.
func FormatMicros(us float64) string {
	switch {
	case math.IsNaN(us) || math.IsInf(us, 0):
		return "-"
	case us >= 10000:
		return strconv.FormatFloat(us, 'f', 0, 64)
	case us >= 100:
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return strconv.FormatFloat(us, 'f', 2, 64)
}

// Report is commbench's JSON document.
type Report struct {
	Tool    string   `json:"tool"`
	Meta    []Meta   `json:"runs"`
	Results []Result `json:"results"`
	// Variants holds, in comparison mode, every row of every run of a
	// best-of series (one series per forced algorithm, e.g.
	// "mpi-shm-k4", Algo set), of which Results keeps the fastest.
	Variants []Result `json:"variants,omitempty"`
}

// WriteJSON writes the runs' descriptions and results as one indented
// JSON document.
func WriteJSON(w io.Writer, metas []Meta, results []Result) error {
	return WriteJSONVariants(w, metas, results, nil)
}

// WriteJSONVariants is WriteJSON with the rows of a best-of series'
// variants (Report.Variants).
func WriteJSONVariants(w io.Writer, metas []Meta, results, variants []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if results == nil {
		results = []Result{}
	}
	return enc.Encode(Report{Tool: "commbench", Meta: metas, Results: results, Variants: variants})
}

// ReadJSON reads a document WriteJSON wrote.
func ReadJSON(r io.Reader) (Report, error) {
	var rep Report
	err := json.NewDecoder(r).Decode(&rep)
	return rep, err
}

// csvHeader lists the CSV columns.
var csvHeader = []string{
	"series", "op", "size_bytes", "count", "type", "redop", "root", "ranks", "warmup", "iters",
	"time_us", "min_us", "median_us", "max_us", "algbw_gbps", "busbw_gbps", "wrong", "runs", "skipped", "algorithm",
}

// WriteCSV writes results as CSV with a header line. Times and
// bandwidths keep full precision; wrong is -1 when not checked.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	i := strconv.Itoa
	for _, r := range results {
		rec := []string{
			r.Series, r.Op.String(), strconv.FormatInt(r.Bytes, 10), i(r.Count), r.DType, r.RedOp, i(r.Root),
			i(r.Ranks), i(r.Warmup), i(r.Iters), f(r.TimeUS), f(r.MinUS), f(r.MedUS), f(r.MaxUS),
			f(r.AlgBW), f(r.BusBW), strconv.FormatInt(r.Wrong, 10), i(r.Runs), r.Skip, r.Algo,
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// seriesNames lists the distinct series of results in first-seen order.
func seriesNames(results []Result) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range results {
		if !seen[r.Series] {
			seen[r.Series] = true
			names = append(names, r.Series)
		}
	}
	return names
}

// opsOf lists the distinct ops of results in first-seen order.
func opsOf(results []Result) []Op {
	var ops []Op
	seen := map[Op]bool{}
	for _, r := range results {
		if !seen[r.Op] {
			seen[r.Op] = true
			ops = append(ops, r.Op)
		}
	}
	return ops
}
