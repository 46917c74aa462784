package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The mpi-shm-best and mpi-tcp-best series: Open MPI at its best. Open
// MPI's coll/tuned component picks an algorithm per call from fixed rules
// (what mpi-shm and mpi-tcp measure); with coll_tuned_use_dynamic_rules 1
// and coll_tuned_<op>_algorithm K it runs algorithm K instead. A best-of
// series runs the plan once per K (each run a "variant", forcing K for
// every op of the plan that has a K-th algorithm, and running only those
// ops' cases), interleaved with the other series like any of them, and
// reports per case the variant with the lowest median time, naming its K.

// tunedAlgorithm is one of Open MPI's coll/tuned algorithms of an op: the
// K of coll_tuned_<op>_algorithm, and its name as ompi_info prints it.
type tunedAlgorithm struct {
	K    int
	Name string
}

func (a tunedAlgorithm) String() string { return strconv.Itoa(a.K) + " " + a.Name }

// tunedParam is, per op, the stem of the MCA parameter that forces the
// algorithm of the MPI call peers/mpi_bench.c makes for it
// (coll_tuned_<stem>_algorithm). Ops not here (send/recv, ping-pong) have
// no collective algorithm.
var tunedParam = map[Op]string{
	AllReduce: "allreduce", Reduce: "reduce", Broadcast: "bcast", AllGather: "allgather",
	ReduceScatter: "reduce_scatter_block", // MPI_Reduce_scatter_block
	AllToAll:      "alltoall", Barrier: "barrier",
}

// twoProcOnly is the name of the algorithms Open MPI runs for 2 ranks only
// (allgather 6, alltoall 5, barrier 5); forced at another size they fail.
const twoProcOnly = "two_proc"

// openMPI41Tuned is the list `ompi_info --param coll tuned --level 9`
// prints for Open MPI 4.1.4, used when ompi_info cannot be run.
var openMPI41Tuned = map[Op][]tunedAlgorithm{
	AllReduce: {{1, "basic_linear"}, {2, "nonoverlapping"}, {3, "recursive_doubling"}, {4, "ring"}, {5, "segmented_ring"}, {6, "rabenseifner"}},
	Reduce:    {{1, "linear"}, {2, "chain"}, {3, "pipeline"}, {4, "binary"}, {5, "binomial"}, {6, "in-order_binary"}, {7, "rabenseifner"}},
	Broadcast: {{1, "basic_linear"}, {2, "chain"}, {3, "pipeline"}, {4, "split_binary_tree"}, {5, "binary_tree"},
		{6, "binomial"}, {7, "knomial"}, {8, "scatter_allgather"}, {9, "scatter_allgather_ring"}},
	AllGather:     {{1, "linear"}, {2, "bruck"}, {3, "recursive_doubling"}, {4, "ring"}, {5, "neighbor"}, {6, "two_proc"}},
	ReduceScatter: {{1, "basic_linear"}, {2, "recursive_doubling"}, {3, "recursive_halving"}, {4, "butterfly"}},
	AllToAll:      {{1, "linear"}, {2, "pairwise"}, {3, "modified_bruck"}, {4, "linear_sync"}, {5, "two_proc"}},
	Barrier:       {{1, "linear"}, {2, "double_ring"}, {3, "recursive_doubling"}, {4, "bruck"}, {5, "two_proc"}, {6, "tree"}},
}

// parseTunedAlgorithms reads the output of `ompi_info --param coll tuned
// --level 9 --parsable`: the enumerator lines of every
// coll_tuned_<stem>_algorithm parameter of tunedParam, such as
//
//	mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:4:ring
//
// K = 0 ("ignore": the fixed rules) is left out.
func parseTunedAlgorithms(r io.Reader) (map[Op][]tunedAlgorithm, error) {
	byParam := map[string]Op{}
	for op, stem := range tunedParam {
		byParam["coll_tuned_"+stem+"_algorithm"] = op
	}
	out := map[Op][]tunedAlgorithm{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.SplitN(strings.TrimSpace(sc.Text()), ":", 9)
		if len(f) != 9 || f[0] != "mca" || f[5] != "enumerator" || f[6] != "value" {
			continue
		}
		op, ok := byParam[f[4]]
		if !ok {
			continue
		}
		k, err := strconv.Atoi(f[7])
		if err != nil || k < 0 {
			return nil, fmt.Errorf("ompi_info: %s: algorithm %q is not a number", f[4], f[7])
		}
		if k == 0 {
			continue
		}
		out[op] = append(out[op], tunedAlgorithm{K: k, Name: f[8]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ompi_info: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ompi_info lists no coll_tuned_*_algorithm values (is coll/tuned built?)")
	}
	for op := range out {
		slices.SortFunc(out[op], func(a, b tunedAlgorithm) int { return a.K - b.K })
	}
	return out, nil
}

// probeTunedAlgorithms asks the ompi_info beside mpirun (else on PATH) for
// this Open MPI's tuned algorithms; when that fails it returns
// openMPI41Tuned. source says which list it is.
func probeTunedAlgorithms(ctx context.Context, mpirun string) (algos map[Op][]tunedAlgorithm, source string) {
	info := "ompi_info"
	if p, err := exec.LookPath(mpirun); err == nil {
		if q := filepath.Join(filepath.Dir(p), "ompi_info"); fileExists(q) {
			info = q
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, info, "--param", "coll", "tuned", "--level", "9", "--parsable")
	cmd.Stdout = &out
	err := cmd.Run()
	if err == nil {
		if algos, err = parseTunedAlgorithms(&out); err == nil {
			return algos, "ompi_info"
		}
	}
	return openMPI41Tuned, fmt.Sprintf("the built-in Open MPI 4.1 list (%s: %v)", info, oneLine(err))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// MPIAlgoChoice is --mpi-algos: per op, the only tuned algorithms the
// best-of series try; ops it does not name try every one. A flag.Value;
// the flag may be repeated. Its zero value (nil) restricts nothing.
type MPIAlgoChoice map[Op][]int

// String implements flag.Value.
func (c MPIAlgoChoice) String() string {
	var parts []string
	for _, op := range AllOps {
		if ks, ok := c[op]; ok {
			s := make([]string, len(ks))
			for i, k := range ks {
				s[i] = strconv.Itoa(k)
			}
			parts = append(parts, op.String()+"="+strings.Join(s, ","))
		}
	}
	return strings.Join(parts, " ")
}

// Set implements flag.Value: op=K,K,... with ranges (allreduce=2,4-6);
// several ops may be given space-separated in one value.
func (c *MPIAlgoChoice) Set(v string) error {
	if *c == nil {
		*c = MPIAlgoChoice{}
	}
	fields := strings.Fields(v)
	if len(fields) == 0 {
		return fmt.Errorf("want op=K,... (e.g. allreduce=2,4-6)")
	}
	for _, kv := range fields {
		name, list, ok := strings.Cut(kv, "=")
		if !ok || list == "" {
			return fmt.Errorf("%q: want op=K,... (e.g. allreduce=2,4-6)", kv)
		}
		op, err := ParseOp(name)
		if err != nil {
			return err
		}
		if _, ok := tunedParam[op]; !ok {
			return fmt.Errorf("%q: Open MPI has no tuned algorithms for %v", kv, op)
		}
		var ks []int
		for _, item := range strings.Split(list, ",") {
			lo, hi, isRange := strings.Cut(item, "-")
			a, errA := strconv.Atoi(strings.TrimSpace(lo))
			b, errB := a, error(nil)
			if isRange {
				b, errB = strconv.Atoi(strings.TrimSpace(hi))
			}
			if errA != nil || errB != nil || a < 1 || b < a {
				return fmt.Errorf("%q: %q is not an algorithm number (>= 1) or range (2-5)", kv, item)
			}
			for k := a; k <= b; k++ {
				if !slices.Contains(ks, k) {
					ks = append(ks, k)
				}
			}
		}
		slices.Sort(ks)
		(*c)[op] = ks
	}
	return nil
}

// mpiVariant is one run of a best-of series: per op, the algorithm it
// forces; only those ops' cases run.
type mpiVariant struct {
	K      int
	Forced map[Op]tunedAlgorithm
}

// planMPIVariants lists the runs of a best-of series for n ranks and the
// ops of a plan (in plan order): variant K forces algorithm K of every op
// that has it, among algos, narrowed by choice, without the 2-rank-only
// algorithms unless n is 2. Ops without tuned algorithms are left out. It
// fails when choice names an algorithm algos does not list.
func planMPIVariants(ops []Op, algos map[Op][]tunedAlgorithm, choice MPIAlgoChoice, n int) ([]mpiVariant, error) {
	byK := map[int]map[Op]tunedAlgorithm{}
	for _, op := range ops {
		if _, ok := tunedParam[op]; !ok {
			continue
		}
		listed := algos[op]
		want, restricted := choice[op]
		for _, k := range want {
			i := slices.IndexFunc(listed, func(a tunedAlgorithm) bool { return a.K == k })
			switch {
			case i < 0:
				return nil, fmt.Errorf("--mpi-algos %v=%d: this Open MPI has no such algorithm (it lists %s)", op, k, algoList(listed))
			case listed[i].Name == twoProcOnly && n != 2:
				return nil, fmt.Errorf("--mpi-algos %v=%d: %s runs on 2 ranks only, not %d", op, k, listed[i], n)
			}
		}
		for _, a := range listed {
			if (restricted && !slices.Contains(want, a.K)) || (a.Name == twoProcOnly && n != 2) {
				continue
			}
			if byK[a.K] == nil {
				byK[a.K] = map[Op]tunedAlgorithm{}
			}
			byK[a.K][op] = a
		}
	}
	var out []mpiVariant
	for k, forced := range byK {
		out = append(out, mpiVariant{K: k, Forced: forced})
	}
	slices.SortFunc(out, func(a, b mpiVariant) int { return a.K - b.K })
	return out, nil
}

// algoList prints algorithms as "1 linear, 2 bruck".
func algoList(as []tunedAlgorithm) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// mpiVariantArgs are the mpirun arguments that force v's algorithms.
func mpiVariantArgs(v mpiVariant) []string {
	args := []string{"--mca", "coll_tuned_use_dynamic_rules", "1"}
	for _, op := range sortedOps(v.Forced) {
		args = append(args, "--mca", "coll_tuned_"+tunedParam[op]+"_algorithm", strconv.Itoa(v.Forced[op].K))
	}
	return args
}

func sortedOps[V any](m map[Op]V) []Op {
	ops := make([]Op, 0, len(m))
	for op := range m {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// describeMPIVariants says what a best-of series tries, for the header:
// per op (in plan order) the algorithms, and the variants' count.
func describeMPIVariants(ops []Op, vs []mpiVariant) string {
	var parts []string
	for _, op := range ops {
		var ks []string
		for _, v := range vs {
			if a, ok := v.Forced[op]; ok {
				ks = append(ks, strconv.Itoa(a.K))
			}
		}
		if len(ks) > 0 {
			parts = append(parts, fmt.Sprintf("%v %s", op, strings.Join(ks, ",")))
		}
	}
	runs := "runs"
	if len(vs) == 1 {
		runs = "run"
	}
	return fmt.Sprintf("%s (%d %s per btl and round)", strings.Join(parts, "; "), len(vs), runs)
}

// filterPlan keeps the cases of p whose op keep accepts.
func filterPlan(p Plan, keep func(Op) bool) Plan {
	q := p
	q.Cases = nil
	for _, c := range p.Cases {
		if keep(c.Op) {
			q.Cases = append(q.Cases, c)
		}
	}
	return q
}

// planOps lists the distinct ops of p's cases in order.
func planOps(p Plan) []Op {
	var ops []Op
	for _, c := range p.Cases {
		if !slices.Contains(ops, c.Op) {
			ops = append(ops, c.Op)
		}
	}
	return ops
}

// bestOf makes the rows of a best-of series from its variants' rows: per
// case of plan, the row with the lowest time (the median over runs)
// among the variants that measured it, renamed series and keeping its
// Algo. A case every variant skipped keeps the first skip; a case no
// variant ran (an op without tuned algorithms) has no row. Equal times go
// to the variant listed first.
func bestOf(series string, plan Plan, variants [][]Result) []Result {
	var out []Result
	for _, cs := range plan.Cases {
		var best, skipped *Result
		for _, rows := range variants {
			for i := range rows {
				r := &rows[i]
				if r.Op != cs.Op || r.Bytes != cs.Bytes {
					continue
				}
				switch {
				case r.Skip != "" || r.TimeUS <= 0:
					if skipped == nil {
						skipped = r
					}
				case best == nil || r.TimeUS < best.TimeUS:
					best = r
				}
			}
		}
		switch {
		case best != nil:
			r := *best
			r.Series = series
			out = append(out, r)
		case skipped != nil:
			r := *skipped
			r.Series = series
			out = append(out, r)
		}
	}
	return out
}

// Series links: which ratios the comparison prints. A gocomm series is
// compared with the peers of its own link (shared memory or TCP) and with
// the peers that have none here (gloo, the library a PyTorch user would
// otherwise run); series of unknown link are compared with every peer.
var seriesLink = map[string]string{
	SeriesGocommSHM: "shm", SeriesGocommSHMShared: "shm", SeriesMPIBackend: "shm", SeriesMPISHM: "shm", SeriesMPISHMBest: "shm", SeriesMPISHMMT: "shm",
	SeriesGocommTCP: "tcp", SeriesMPITCP: "tcp", SeriesMPITCPBest: "tcp",
}

// ratioPair is a ratio column: ours over peer.
type ratioPair struct{ ours, peer string }

// ratioPairs lists the ratio columns: every ours with every peer of the
// same or no link, ours-major.
func ratioPairs(ours, peers []string) []ratioPair {
	var out []ratioPair
	for _, o := range ours {
		for _, p := range peers {
			lo, lp := seriesLink[o], seriesLink[p]
			if lo == "" || lp == "" || lo == lp {
				out = append(out, ratioPair{o, p})
			}
		}
	}
	return out
}

// algoK is the K of an Algo ("4 ring" -> "4").
func algoK(algo string) string {
	k, _, _ := strings.Cut(algo, " ")
	return k
}
