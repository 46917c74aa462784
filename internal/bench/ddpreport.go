package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"

	"github.com/gocomm/comm/internal/models"
)

// Derived keys of a DDP run, beside the modes.
const (
	// keyTorchDDP is torch's DDP cost: its step with DDP minus the same
	// step without (ModeTorchDDP - ModeTorchPlain), in the same run.
	keyTorchDDP = "ddp-cost"
	// keyExposed is the communication the backward did not hide:
	// ModeOverlap - ModeCompute, in the same job.
	keyExposed = "exposed"
)

// DDPRow is one series' figures for one model: per mode and derived key
// the median over the runs (seconds), and the runs' ratios' medians.
type DDPRow struct {
	Series string
	Runs   int
	Times  map[string]float64
	// Ratios by name ("reducer/flat", "pertensor/reducer",
	// "ddp/reducer", "exposed/flat"), each the median over the runs of
	// that run's ratio.
	Ratios map[string]float64
	Wrong  int64 // over every checked mode and run; -1: none checked
	// Planned is the simulated backward's planned total (seconds).
	Planned float64
}

// DDPReport is one model's comparison.
type DDPReport struct {
	Model models.Model
	Ranks int
	Rows  []DDPRow
	Notes []string
}

// ddpRunValues turns one job's samples into its values by key: each
// mode's loop time per step, and the derived keys.
func ddpRunValues(samples []DDPSample) map[string]float64 {
	v := map[string]float64{}
	for _, s := range samples {
		v[s.Mode] = s.Loop
	}
	if d, ok := v[ModeTorchDDP]; ok {
		if p, ok := v[ModeTorchPlain]; ok {
			v[keyTorchDDP] = d - p
		}
	}
	if o, ok := v[ModeOverlap]; ok {
		if c, ok := v[ModeCompute]; ok {
			v[keyExposed] = o - c
		}
	}
	return v
}

// AggregateDDP combines the runs of every series (runs[s][r] is series
// s's samples of run r, nil when it failed) into a report. Ratios pair
// figures of one run: "ddp/reducer" is torch-gloo's DDP cost over this
// series' Reducer step of the same run.
func AggregateDDP(m models.Model, ranks int, series []string, runs map[string][][]DDPSample) DDPReport {
	rep := DDPReport{Model: m, Ranks: ranks}
	vals := map[string][]map[string]float64{} // series -> per run (nil: failed)
	for _, s := range series {
		for _, samples := range runs[s] {
			var v map[string]float64
			if samples != nil {
				v = ddpRunValues(samples)
			}
			vals[s] = append(vals[s], v)
		}
	}
	torch := vals[SeriesTorchGloo]
	for _, s := range series {
		row := DDPRow{Series: s, Times: map[string]float64{}, Ratios: map[string]float64{}, Wrong: -1}
		keys := map[string]bool{}
		for _, v := range vals[s] {
			if v != nil {
				row.Runs++
			}
			for k := range v {
				keys[k] = true
			}
		}
		if row.Runs == 0 {
			continue
		}
		for k := range keys {
			var xs []float64
			for _, v := range vals[s] {
				if x, ok := v[k]; ok {
					xs = append(xs, x)
				}
			}
			row.Times[k] = medianOf(xs)
		}
		ratio := func(name string, num func(r int) (float64, bool), den func(r int) (float64, bool)) {
			var xs []float64
			for r := range vals[s] {
				a, ok1 := num(r)
				b, ok2 := den(r)
				if ok1 && ok2 && b > 0 && a > 0 {
					xs = append(xs, a/b)
				}
			}
			if len(xs) > 0 {
				row.Ratios[name] = medianOf(xs)
			}
		}
		mine := func(k string) func(int) (float64, bool) {
			return func(r int) (float64, bool) { x, ok := vals[s][r][k]; return x, ok }
		}
		theirs := func(k string) func(int) (float64, bool) {
			return func(r int) (float64, bool) {
				if r >= len(torch) {
					return 0, false
				}
				x, ok := torch[r][k]
				return x, ok
			}
		}
		ratio("reducer/flat", mine(ModeReducer), mine(ModeFlat))
		ratio("pertensor/reducer", mine(ModePerTensor), mine(ModeReducer))
		ratio("reducer/flatshared", mine(ModeReducer), mine(ModeFlatShared))
		ratio("exposed/flat", mine(keyExposed), mine(ModeFlat))
		ratio("exposed/reducer", mine(keyExposed), mine(ModeReducer))
		if s != SeriesTorchGloo {
			ratio("ddp/reducer", theirs(keyTorchDDP), mine(ModeReducer))
			ratio("torchflat/flat", theirs(ModeFlat), mine(ModeFlat))
		} else {
			ratio("ddp/flat", mine(keyTorchDDP), mine(ModeFlat))
		}
		for _, samples := range runs[s] {
			for _, x := range samples {
				if x.Wrong >= 0 {
					row.Wrong = max(row.Wrong, 0) + x.Wrong
				}
				if x.Mode == ModeOverlap {
					row.Planned = x.Compute
				}
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep
}

// medianOf is the median of xs (unsorted; NaN when empty).
func medianOf(xs []float64) float64 {
	return Median(slices.Sorted(slices.Values(xs)))
}

// Targets of the issue (docs/performance.md, "Data-parallel gradient
// reduction").
const (
	targetReducerOverFlat   = 1.15 // reducer/flat for resnet50 and bert-base, at most
	targetPerTensorOverRed  = 5    // pertensor/reducer for small1000, at least
	targetDDPOverReducer    = 3    // torch DDP cost / reducer, at least
	targetExposedOverAllred = 0.25 // exposed / flat when compute >= communication, at most
)

// WriteDDPReport prints one model's table, its overlap figures, the
// targets and the notes.
func WriteDDPReport(w io.Writer, rep DDPReport, cfg DDPConfig) {
	m := rep.Model
	fmt.Fprintf(w, "#\n# %s: %d tensors, %d params (%s of float32 gradients), %d ranks\n",
		m.Name, len(m.Tensors), m.Params(), HumanSize(int64(m.Params())*4), rep.Ranks)
	fmt.Fprintf(w, "# step (ms): median over %d interleaved runs of each run's mean step, the slowest rank's; %d warm-ups, %d steps; ratios: median of each run's ratio\n",
		cfg.Runs, cfg.Warmup, cfg.Iters)
	ms := func(row DDPRow, k string) string {
		x, ok := row.Times[k]
		if !ok || math.IsNaN(x) {
			return "-"
		}
		return formatMillis(x)
	}
	rt := func(row DDPRow, k string) string {
		x, ok := row.Ratios[k]
		if !ok {
			return "-"
		}
		return ratioString(x)
	}
	rows := [][]string{
		{"series", "(a)pertensor", "(b)reducer", "(c)flat", "(d)ddp", "plain", "b/c", "a/b", "d/b", "wrong"},
	}
	shared := false
	for _, row := range rep.Rows {
		_, ok := row.Times[ModeFlatShared]
		shared = shared || ok
	}
	if shared {
		rows[0] = slices.Insert(rows[0], len(rows[0])-1, "flatshared", "b/flatshared")
	}
	for _, row := range rep.Rows {
		wrong := "-"
		if row.Wrong >= 0 {
			wrong = strconv.FormatInt(row.Wrong, 10)
		}
		r := []string{row.Series, ms(row, ModePerTensor), ms(row, ModeReducer), ms(row, ModeFlat), ms(row, keyTorchDDP), ms(row, ModeTorchPlain),
			rt(row, "reducer/flat"), rt(row, "pertensor/reducer"), rt(row, "ddp/reducer"), wrong}
		if row.Series == SeriesTorchGloo {
			r[6], r[7], r[8] = "d/c "+rt(row, "ddp/flat"), "-", "-"
		}
		if shared {
			r = slices.Insert(r, len(r)-1, ms(row, ModeFlatShared), rt(row, "reducer/flatshared"))
		}
		rows = append(rows, r)
	}
	writeAligned(w, rows, 1)
	fmt.Fprintln(w, "#   (d) torch DDP's cost: its step with DDP minus the same step without (plain), same run; d/b: that over this series' reducer step of the same run")
	if cfg.Overlap {
		fmt.Fprintf(w, "# overlap: simulated backward (%s), %.2f x this job's flat all-reduce step, the Reducer marking each gradient Ready as its layer ends\n", cfg.ComputeKind, cfg.ComputeFactor)
		orows := [][]string{{"series", "planned", "compute", "overlap", "exposed", "exposed/flat", "exposed/reducer"}}
		for _, row := range rep.Rows {
			if _, ok := row.Times[ModeOverlap]; !ok {
				continue
			}
			orows = append(orows, []string{row.Series, formatMillis(row.Planned), ms(row, ModeCompute), ms(row, ModeOverlap), ms(row, keyExposed),
				percent(row.Ratios["exposed/flat"]), percent(row.Ratios["exposed/reducer"])})
		}
		writeAligned(w, orows, 1)
	}
	writeDDPTargets(w, rep, cfg)
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w, "# notes:")
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "#   %s\n", n)
		}
	}
}

func percent(x float64) string {
	if math.IsNaN(x) || x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// writeDDPTargets says, per gocomm series, which of the targets
// this model's figures meet.
func writeDDPTargets(w io.Writer, rep DDPReport, cfg DDPConfig) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	for _, row := range rep.Rows {
		if row.Series == SeriesTorchGloo {
			continue
		}
		var parts []string
		if x, ok := row.Ratios["reducer/flat"]; ok && (rep.Model.Name == models.NameResNet50 || rep.Model.Name == models.NameBERTBase) {
			parts = append(parts, fmt.Sprintf("reducer/flat %.2fx <= %.2fx %s", x, targetReducerOverFlat, verdict(x <= targetReducerOverFlat)))
		}
		if x, ok := row.Ratios["pertensor/reducer"]; ok && rep.Model.Name == models.NameSmall {
			parts = append(parts, fmt.Sprintf("pertensor/reducer %.2fx >= %dx %s", x, targetPerTensorOverRed, verdict(x >= targetPerTensorOverRed)))
		}
		if x, ok := row.Ratios["ddp/reducer"]; ok {
			parts = append(parts, fmt.Sprintf("torch-ddp/reducer %.2fx >= %dx %s", x, targetDDPOverReducer, verdict(x >= targetDDPOverReducer)))
		}
		if x, ok := row.Ratios["exposed/flat"]; ok && cfg.ComputeFactor >= 1 {
			parts = append(parts, fmt.Sprintf("exposed/flat %.0f%% <= %.0f%% %s", 100*x, 100*targetExposedOverAllred, verdict(x <= targetExposedOverAllred)))
		}
		for _, p := range parts {
			fmt.Fprintf(w, "# target %s %s: %s\n", rep.Model.Name, row.Series, p)
		}
	}
}

// oversubscribed says so when ranks outnumber this host's CPUs.
func oversubscribed(ranks int) string {
	if ranks > runtime.NumCPU() {
		return " (oversubscribed: ranks share CPUs, and their computing and communicating compete for them)"
	}
	return ""
}
