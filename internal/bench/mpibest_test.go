package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

// What `ompi_info --param coll tuned --level 9 --parsable` prints (Open
// MPI 4.1.4), cut down: other kinds of lines, other parameters, "ignore".
const ompiInfoSample = `mca:coll:tuned:param:coll_tuned_allreduce_algorithm:value:0
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:source:default
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:0:ignore
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:4:ring
mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:1:basic_linear
mca:coll:tuned:param:coll_tuned_allgatherv_algorithm:enumerator:value:2:bruck
mca:coll:tuned:param:coll_tuned_allgather_algorithm:enumerator:value:6:two_proc
mca:coll:tuned:param:coll_tuned_reduce_scatter_algorithm:enumerator:value:3:ring
mca:coll:tuned:param:coll_tuned_reduce_scatter_block_algorithm:enumerator:value:4:butterfly
mca:coll:tuned:param:coll_tuned_reduce_algorithm:enumerator:value:6:in-order_binary
mca:coll:tuned:param:coll_tuned_allreduce_algorithm_segmentsize:value:0
`

func TestParseTunedAlgorithms(t *testing.T) {
	got, err := parseTunedAlgorithms(strings.NewReader(ompiInfoSample))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Op][]tunedAlgorithm{
		AllReduce:     {{1, "basic_linear"}, {4, "ring"}},
		AllGather:     {{6, "two_proc"}},
		ReduceScatter: {{4, "butterfly"}}, // MPI_Reduce_scatter_block's, not MPI_Reduce_scatter's
		Reduce:        {{6, "in-order_binary"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %v\nwant   %v", got, want)
	}
	if _, err := parseTunedAlgorithms(strings.NewReader("mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:x:y\n")); err == nil {
		t.Error("a non-numeric algorithm parsed")
	}
	if _, err := parseTunedAlgorithms(strings.NewReader("Open MPI: 4.1.4\n")); err == nil || !strings.Contains(err.Error(), "no coll_tuned") {
		t.Errorf("output without algorithms: %v", err)
	}
	// The built-in list is what this Open MPI's ompi_info says.
	for op, stem := range tunedParam {
		if len(openMPI41Tuned[op]) == 0 || stem == "" {
			t.Errorf("%v: no built-in algorithms or parameter", op)
		}
	}
}

func TestMPIAlgoChoice(t *testing.T) {
	var c MPIAlgoChoice
	if c.String() != "" {
		t.Errorf("zero choice = %q", c.String())
	}
	for _, v := range []string{"allreduce=6,2-4", "bcast=9 alltoall=1"} {
		if err := c.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.String(); got != "allreduce=2,3,4,6 broadcast=9 alltoall=1" {
		t.Errorf("choice = %q", got)
	}
	for _, bad := range []string{"", "allreduce=", "allreduce=a", "allreduce=0", "allreduce=3-2", "pingpong=1", "x=1"} {
		var c MPIAlgoChoice
		if err := c.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

func variantKs(vs []mpiVariant) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%d:", v.K)
		for _, op := range sortedOps(v.Forced) {
			fmt.Fprintf(&b, " %v=%s", op, v.Forced[op].Name)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func TestPlanMPIVariants(t *testing.T) {
	ops := []Op{AllReduce, SendRecv, AllGather, Broadcast}
	vs, err := planMPIVariants(ops, openMPI41Tuned, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	// One run per K, forcing K for every op that has one; send/recv has
	// no algorithms; two_proc on 2 ranks.
	want := "1: allreduce=basic_linear broadcast=basic_linear allgather=linear; " +
		"2: allreduce=nonoverlapping broadcast=chain allgather=bruck; " +
		"3: allreduce=recursive_doubling broadcast=pipeline allgather=recursive_doubling; " +
		"4: allreduce=ring broadcast=split_binary_tree allgather=ring; " +
		"5: allreduce=segmented_ring broadcast=binary_tree allgather=neighbor; " +
		"6: allreduce=rabenseifner broadcast=binomial allgather=two_proc; " +
		"7: broadcast=knomial; 8: broadcast=scatter_allgather; 9: broadcast=scatter_allgather_ring; "
	if got := variantKs(vs); got != want {
		t.Errorf("2 ranks:\n got %s\nwant %s", got, want)
	}
	if got := describeMPIVariants(ops, vs); got != "allreduce 1,2,3,4,5,6; allgather 1,2,3,4,5,6; broadcast 1,2,3,4,5,6,7,8,9 (9 runs per btl and round)" {
		t.Errorf("description = %q", got)
	}
	// 4 ranks: no two_proc; a choice narrows an op.
	choice := MPIAlgoChoice{AllReduce: {4, 6}, Broadcast: {1}}
	vs, err = planMPIVariants([]Op{AllReduce, AllGather, Broadcast}, openMPI41Tuned, choice, 4)
	if err != nil {
		t.Fatal(err)
	}
	want = "1: broadcast=basic_linear allgather=linear; 2: allgather=bruck; 3: allgather=recursive_doubling; " +
		"4: allreduce=ring allgather=ring; 5: allgather=neighbor; 6: allreduce=rabenseifner; "
	if got := variantKs(vs); got != want {
		t.Errorf("4 ranks, allreduce=4,6 bcast=1:\n got %s\nwant %s", got, want)
	}
	if vs, err := planMPIVariants([]Op{PingPong}, openMPI41Tuned, nil, 2); err != nil || len(vs) != 0 {
		t.Errorf("ping-pong alone: %v, %v", vs, err)
	}
	for _, tc := range []struct {
		choice MPIAlgoChoice
		n      int
		want   string
	}{
		{MPIAlgoChoice{AllReduce: {7}}, 2, "allreduce=7: this Open MPI has no such algorithm (it lists 1 basic_linear, 2 nonoverlapping"},
		{MPIAlgoChoice{AllGather: {6}}, 4, "6 two_proc runs on 2 ranks only, not 4"},
	} {
		if _, err := planMPIVariants([]Op{AllReduce, AllGather}, openMPI41Tuned, tc.choice, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("planMPIVariants(%v, n=%d) error = %v; want %q", tc.choice, tc.n, err, tc.want)
		}
	}
}

func TestMPIVariantArgs(t *testing.T) {
	v := mpiVariant{K: 3, Forced: map[Op]tunedAlgorithm{Broadcast: {3, "pipeline"}, AllReduce: {3, "recursive_doubling"}, ReduceScatter: {3, "recursive_halving"}}}
	got := strings.Join(mpiVariantArgs(v), " ")
	want := "--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 3 --mca coll_tuned_bcast_algorithm 3 --mca coll_tuned_reduce_scatter_block_algorithm 3"
	if got != want {
		t.Errorf("args = %s\nwant   %s", got, want)
	}
	if got := strings.Join(mpiBTL(SeriesMPITCPBest), " "); got != "--mca btl self,tcp --mca btl_tcp_if_include lo" {
		t.Errorf("mpi-tcp-best btl = %s", got)
	}
	if got := strings.Join(mpiBTL(SeriesMPISHMBest), " "); got != "--mca btl self,vader" {
		t.Errorf("mpi-shm-best btl = %s", got)
	}
}

func TestBestOf(t *testing.T) {
	plan := Plan{Cases: []Case{{Op: AllReduce, Bytes: 8}, {Op: AllReduce, Bytes: 1 << 20}, {Op: AllToAll, Bytes: 64}, {Op: PingPong, Bytes: 8}}}
	row := func(op Op, b int64, us float64, algo, skip string) Result {
		return Result{Series: "v", Op: op, Bytes: b, TimeUS: us, BusBW: 1 / us, Algo: algo, Skip: skip}
	}
	variants := [][]Result{
		{row(AllReduce, 8, 2, "1 basic_linear", ""), row(AllReduce, 1<<20, 900, "1 basic_linear", ""), row(AllToAll, 64, 0, "1 linear", "crashed")},
		{row(AllReduce, 8, 3, "4 ring", ""), row(AllReduce, 1<<20, 300, "4 ring", ""), row(AllToAll, 64, 0, "2 pairwise", "crashed too")},
		{row(AllReduce, 8, 2, "6 rabenseifner", ""), row(AllReduce, 1<<20, 0, "6 rabenseifner", "no run succeeded")},
	}
	got := bestOf("mpi-shm-best", plan, variants)
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3 (ping-pong has no variant): %+v", len(got), got)
	}
	for i, want := range []struct {
		bytes int64
		us    float64
		algo  string
		skip  string
	}{{8, 2, "1 basic_linear", ""}, {1 << 20, 300, "4 ring", ""}, {64, 0, "1 linear", "crashed"}} {
		r := got[i]
		if r.Series != "mpi-shm-best" || r.Bytes != want.bytes || r.TimeUS != want.us || r.Algo != want.algo || r.Skip != want.skip {
			t.Errorf("row %d = %+v; want %d B in %v us by %q (skip %q)", i, r, want.bytes, want.us, want.algo, want.skip)
		}
	}
}

func TestRatioPairs(t *testing.T) {
	ours := []string{SeriesGocommTCP, SeriesGocommSHM, SeriesMPIBackend, "mine"}
	peers := []string{SeriesMPISHM, SeriesMPISHMBest, SeriesMPITCP, SeriesMPITCPBest, SeriesGloo}
	var got []string
	for _, p := range ratioPairs(ours, peers) {
		got = append(got, p.ours+"/"+p.peer)
	}
	want := "gocomm-tcp/mpi-tcp gocomm-tcp/mpi-tcp-best gocomm-tcp/gloo " +
		"gocomm-shm/mpi-shm gocomm-shm/mpi-shm-best gocomm-shm/gloo " +
		"mpi-backend/mpi-shm mpi-backend/mpi-shm-best mpi-backend/gloo " +
		"mine/mpi-shm mine/mpi-shm-best mine/mpi-tcp mine/mpi-tcp-best mine/gloo"
	if strings.Join(got, " ") != want {
		t.Errorf("ratios = %s\nwant     %s", strings.Join(got, " "), want)
	}
}

// variantRunner is a fake best-of variant: it records the cases of the
// plan it is given and writes, per case, the time timeOf gives; its 8 B
// cases have wrongAt8 wrong elements (-1: not checked).
func variantRunner(name, group string, forced map[Op]string, timeOf func(Case) float64, wrongAt8 int64, order *[]string, got map[string][]Case) Runner {
	return Runner{
		Name: name, BestOf: group, Forced: forced,
		Run: func(ctx context.Context, planPath, rawPath string) error {
			*order = append(*order, name)
			f, err := os.Open(planPath)
			if err != nil {
				return err
			}
			defer f.Close()
			plan, err := ParsePlan(f)
			if err != nil {
				return err
			}
			got[name] = plan.Cases
			var samples []Sample
			for _, c := range plan.Cases {
				ts := make([]float64, c.Iters)
				for i := range ts {
					ts[i] = timeOf(c) * 1e-6
				}
				wrong := int64(-1)
				if c.Bytes == 8 {
					wrong = wrongAt8
				}
				samples = append(samples, Sample{Case: c, Times: ts, Wrong: wrong})
			}
			return writeFile(rawPath, func(w io.Writer) error { return WriteRaw(w, 2, samples) })
		},
	}
}

// The best-of series end to end, with fake runners: each variant runs
// only its ops' cases, interleaved with the other series; the table has
// the best-of series with its "alg" column, its footnote and the ratios
// of the gocomm series to it; the JSON and CSV name the winning
// algorithm, and the JSON keeps every variant's rows.
func TestCompareWithBestOf(t *testing.T) {
	specs, _ := ParseOpSpecs("allreduce,alltoall@64,pingpong@8")
	dir := t.TempDir()
	cfg := CompareConfig{
		Ranks: 2, DType: core.Float32, RedOp: core.Sum, Runs: 2, Quiet: true,
		Sweep:    SweepConfig{Ops: specs, Min: 8, Max: 1 << 20, Factor: 1 << 17, Warmup: 1, Iters: 2},
		JSON:     filepath.Join(dir, "c.json"),
		CSV:      filepath.Join(dir, "c.csv"),
		bestNote: "allreduce 1,4; alltoall 1 (2 runs per btl and round); algorithms from ompi_info",
	}
	var order []string
	got := map[string][]Case{}
	// Basic linear wins at 8 B, ring at 1 MiB; only K 1 has all-to-all.
	k1 := func(c Case) float64 { return map[int64]float64{8: 1, 64: 7, 1 << 20: 800}[c.Bytes] }
	k4 := func(c Case) float64 { return map[int64]float64{8: 4, 1 << 20: 200}[c.Bytes] }
	runners := []Runner{
		fakeRunner(SeriesGocommSHM, true, 2, &order, nil),
		fakeRunner(SeriesMPISHM, false, 5, &order, nil),
		variantRunner("mpi-shm-k1", SeriesMPISHMBest, map[Op]string{AllReduce: "1 basic_linear", AllToAll: "1 linear"}, k1, -1, &order, got),
		variantRunner("mpi-shm-k4", SeriesMPISHMBest, map[Op]string{AllReduce: "4 ring"}, k4, 3, &order, got),
		variantRunner("mpi-shm-k9", SeriesMPISHMBest, map[Op]string{Broadcast: "9 scatter_allgather_ring"}, k4, -1, &order, got),
	}
	var out bytes.Buffer
	if err := CompareWith(context.Background(), cfg, dir, runners, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Logf("comparison:\n%s", s)
	// Variants take turns with the series; k9 has nothing of the plan.
	if got, want := strings.Join(order, " "), "gocomm-shm mpi-shm mpi-shm-k1 mpi-shm-k4 mpi-shm mpi-shm-k1 mpi-shm-k4 gocomm-shm"; got != want {
		t.Errorf("order = %s\nwant    %s", got, want)
	}
	if fmt.Sprint(got["mpi-shm-k1"]) != "[{allreduce 8 1 2 0} {allreduce 1048576 1 2 0} {alltoall 64 1 2 0}]" ||
		fmt.Sprint(got["mpi-shm-k4"]) != "[{allreduce 8 1 2 0} {allreduce 1048576 1 2 0}]" {
		t.Errorf("variant plans: %v", got)
	}
	for _, want := range []string{
		"# mpi-*-best: per size the fastest of Open MPI's tuned algorithms, each forced in its own run (alg: its K): allreduce 1,4;",
		"alg", "shm/", "mpi-shm-best",
		"#   alg = K of coll_tuned_allreduce_algorithm: 1 basic_linear, 4 ring\n",
		"#   alg = K of coll_tuned_alltoall_algorithm: 1 linear\n",
		"gocomm-shm/mpi-shm-best",
		// A losing variant's wrong results are not lost with it.
		"#   mpi-shm-k4 (4 ring): allreduce 8 B: 6 wrong elements\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("comparison lacks %q:\n%s", want, s)
		}
	}
	// Rows: gocomm-shm takes 3 us (the median of runs 1 and 2 of 2 us x
	// the run's index), mpi-shm 7.5; the best 1 us (K 1) at 8 B and 200
	// us (K 4) at 1 MiB. Columns: size, gocomm-shm's 3, mpi-shm's 3,
	// mpi-shm-best's 3 and alg, then shm/mpi-shm and shm/mpi-shm-best.
	wantRows := map[string]string{
		"allreduce 8":       "1.00 1 2.50x 0.33x",
		"allreduce 1048576": "200.0 4 2.50x 66.7x",
		"alltoall 64":       "7.00 1 2.50x 2.33x",
		"pingpong 8":        "- - 2.50x -",
	}
	op := ""
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "#":
			op = f[1]
		case len(f) == 13 && f[0] != "#":
			key := op + " " + f[0]
			if got := strings.Join([]string{f[7], f[10], f[11], f[12]}, " "); got != wantRows[key] {
				t.Errorf("%s: best time, alg and ratios %q, want %q in\n%s", key, got, wantRows[key], line)
			}
			delete(wantRows, key)
		}
	}
	if len(wantRows) != 0 {
		t.Errorf("rows missing: %v\n%s", wantRows, s)
	}

	f, err := os.Open(cfg.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	best := map[string]string{}
	for _, r := range rep.Results {
		if r.Series == SeriesMPISHMBest {
			best[fmt.Sprintf("%v@%d", r.Op, r.Bytes)] = r.Algo
		} else if r.Algo != "" {
			t.Errorf("%s row with an algorithm: %+v", r.Series, r)
		}
	}
	if fmt.Sprint(best) != "map[allreduce@1048576:4 ring allreduce@8:1 basic_linear alltoall@64:1 linear]" {
		t.Errorf("best-of rows in the JSON: %v", best)
	}
	if len(rep.Variants) != 5 || rep.Variants[0].Series != "mpi-shm-k1" || rep.Variants[4].Algo != "4 ring" {
		t.Errorf("JSON variants = %+v", rep.Variants)
	}
	if rep.Meta[0].MPIAlgos != cfg.bestNote {
		t.Errorf("JSON meta = %+v", rep.Meta[0])
	}
	cf, err := os.Open(cfg.CSV)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	recs, err := csv.NewReader(cf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	last := len(recs[0]) - 1
	var algos []string
	for _, rec := range recs[1:] {
		if rec[0] == SeriesMPISHMBest {
			algos = append(algos, rec[last])
		}
	}
	if recs[0][last] != "algorithm" || strings.Join(algos, ",") != "1 basic_linear,4 ring,1 linear" {
		t.Errorf("CSV algorithm column %q: %v", recs[0][last], algos)
	}
}

// The runners of a best-of series start mpirun once per variant, with
// the btl of the series and the variant's algorithms forced, and the
// harness is compiled once.
func TestBestOfRunnersCommandLines(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "fake-mpi")
	script := "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> " + log + "\n"
	for _, name := range []string{"mpirun", "mpicc"} {
		if err := os.WriteFile(fake+"-"+name, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := CompareConfig{Ranks: 2, Series: []string{SeriesMPITCPBest, SeriesMPISHM}, MPIRun: fake + "-mpirun", MPICC: fake + "-mpicc", Timeout: 30e9}
	vs := []mpiVariant{
		{K: 1, Forced: map[Op]tunedAlgorithm{AllReduce: {1, "basic_linear"}}},
		{K: 7, Forced: map[Op]tunedAlgorithm{Broadcast: {7, "knomial"}}},
	}
	rs, err := runners(cfg, dir, vs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, fmt.Sprintf("%s(%s %v)", r.Name, r.BestOf, r.Forced))
		if err := r.Setup(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background(), "plan.txt", "raw.txt"); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(names, " "); got != "mpi-tcp-k1(mpi-tcp-best map[allreduce:1 basic_linear]) mpi-tcp-k7(mpi-tcp-best map[broadcast:7 knomial]) mpi-shm( map[])" {
		t.Errorf("runners = %s", got)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(calls) != 4 || !strings.HasPrefix(calls[0], "fake-mpi-mpicc -O2") {
		t.Fatalf("calls (want one compile, three runs):\n%s", b)
	}
	tcpBest := "--mca btl self,tcp --mca btl_tcp_if_include lo --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_"
	for i, want := range []string{tcpBest + "allreduce_algorithm 1 " + filepath.Join(dir, "mpi_bench") + " plan.txt raw.txt",
		tcpBest + "bcast_algorithm 7 ", "--mca btl self,vader " + filepath.Join(dir, "mpi_bench")} {
		if c := calls[i+1]; !strings.HasPrefix(c, "fake-mpi-mpirun -np 2 --oversubscribe --mca pml ob1") || !strings.Contains(c, want) {
			t.Errorf("mpirun call %d = %s\nwant it to contain %s", i+1, c, want)
		}
	}
	if strings.Contains(calls[3], "coll_tuned") {
		t.Errorf("mpi-shm forces an algorithm: %s", calls[3])
	}
}
