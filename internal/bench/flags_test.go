package bench

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/core"
)

func TestParseArgsDefaults(t *testing.T) {
	cfg, err := ParseArgs(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := SweepConfig{Ops: []OpSpec{{Op: AllReduce}}, Min: 8, Max: 64 << 20, Factor: 2, Warmup: 5, Iters: 20}
	// Without --transport, commbench connects as the library does by
	// default (auto), not over TCP.
	if cfg.Ranks != 2 || cfg.Backend != "native" || cfg.Transport != TransportAuto || cfg.seriesSet || cfg.DType != core.Float32 ||
		cfg.RedOp != core.Sum || cfg.Check || cfg.Timeout != 5*time.Minute || cfg.Series != "native/auto" ||
		len(cfg.Sweep.Ops) != 1 || cfg.Sweep.Ops[0] != want.Ops[0] || cfg.Sweep.Min != want.Min || cfg.Sweep.Max != want.Max ||
		cfg.Sweep.Factor != 2 || cfg.Sweep.Warmup != 5 || cfg.Sweep.Iters != 20 {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs(strings.Fields("-n 4 --backend native --transport inproc -b 1K -e 1M -f 4 --op all -d half -o max "+
		"-w 2 -i 7 --budget 64M -r 3 -c --algo allreduce=ring,bcast=tree --timeout 1m --series mine "+
		"--json a.json --csv a.csv --plot a.svg -q"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ranks != 4 || cfg.Transport != TransportInproc || cfg.Sweep.Min != 1024 || cfg.Sweep.Max != 1<<20 ||
		cfg.Sweep.Factor != 4 || len(cfg.Sweep.Ops) != len(AllOps) || cfg.DType != core.Float16 || cfg.RedOp != core.Max ||
		cfg.Sweep.Warmup != 2 || cfg.Sweep.Iters != 7 || cfg.Sweep.Budget != 64<<20 || cfg.Sweep.Root != 3 || !cfg.Check ||
		cfg.Algo.AllReduce != algo.Ring || cfg.Algo.Broadcast != algo.Tree || cfg.Timeout != time.Minute ||
		cfg.Series != "mine" || cfg.JSON != "a.json" || cfg.CSV != "a.csv" || cfg.Plot != "a.svg" || !cfg.Quiet || !cfg.ranksSet || !cfg.seriesSet {
		t.Errorf("parsed = %+v", cfg)
	}
	// Long spellings of nccl-tests' flags.
	cfg, err = ParseArgs(strings.Fields("--minbytes 8 --maxbytes 8 --datatype int32 --redop prod --warmup 0 --iters 1 --check"), &bytes.Buffer{})
	if err != nil || cfg.DType != core.Int32 || cfg.RedOp != core.Prod || cfg.Sweep.Iters != 1 || !cfg.Check {
		t.Errorf("long flags = %+v, %v", cfg, err)
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct{ args, want string }{
		{"-n 0", "-n 0"},
		{"--op nosuch", "unknown op"},
		{"-d complex64", "unknown type"},
		{"-o mean", "unknown reduction"},
		{"--algo allreduce", "op=algorithm"},
		{"--algo scan=ring", "unknown op"},
		{"--algo allreduce=bogo", "unknown algorithm"},
		{"-b 1M -e 1K", "below"},
		{"-i 0", "-i"},
		{"-o band", "cannot reduce"},
		{"--transport carrier-pigeon", "unknown transport"},
		{"-b lots", "size"},
		{"--timeout 0s", "timeout"},
		{"stray", "unexpected argument"},
		{"-n 1 --op pingpong", "2 ranks"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if _, err := ParseArgs(strings.Fields(tt.args), &out); err == nil || !strings.Contains(err.Error()+out.String(), tt.want) {
			t.Errorf("ParseArgs(%q) error = %v (output %q); want one containing %q", tt.args, err, out.String(), tt.want)
		}
	}
	// A root beyond -n is fine when -n was not given: a launcher decides.
	if _, err := ParseArgs(strings.Fields("-r 3 --op broadcast"), &bytes.Buffer{}); err != nil {
		t.Errorf("-r 3 without -n: %v", err)
	}
	if _, err := ParseArgs(strings.Fields("-n 2 -r 3 --op broadcast"), &bytes.Buffer{}); err == nil {
		t.Error("-n 2 -r 3 accepted")
	}
}

func TestUsageStatesTheFormulas(t *testing.T) {
	var out bytes.Buffer
	if _, err := ParseArgs([]string{"-h"}, &out); !errors.Is(err, ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"2(n-1)/n", "reducescatter, allgather    (n-1)/n", "alltoall                    (n-1)/n",
		"broadcast, reduce           1", "sendrecv, pingpong          1", "#wrong", "-transport", "-algo", "-plot", "commbench compare"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

func TestParseAlgorithms(t *testing.T) {
	a, err := ParseAlgorithms(" allreduce=rd , reducescatter=ring,alltoall=pairwise,barrier=tree,reduce=tree,allgather=hd,gather=linear,scatter=tree")
	if err != nil {
		t.Fatal(err)
	}
	want := core.Algorithms{AllReduce: algo.RecursiveDoubling, ReduceScatter: algo.Ring, AllToAll: algo.Pairwise,
		Barrier: algo.Tree, Reduce: algo.Tree, AllGather: algo.HalvingDoubling, Gather: algo.Linear, Scatter: algo.Tree}
	if a != want {
		t.Errorf("ParseAlgorithms = %+v, want %+v", a, want)
	}
	if a, err := ParseAlgorithms(""); err != nil || a != (core.Algorithms{}) {
		t.Errorf("empty = %+v, %v", a, err)
	}
}

func TestTransportFlag(t *testing.T) {
	for _, tr := range []Transport{TransportAuto, TransportTCP, TransportInproc, TransportSHM} {
		var got Transport
		if err := got.Set(strings.ToUpper(tr.String())); err != nil || got != tr {
			t.Errorf("Set(%q) = %v, %v", tr, got, err)
		}
	}
	if s := Transport(9).String(); s != "Transport(9)" {
		t.Errorf("Transport(9) = %q", s)
	}
	var tr Transport
	if err := tr.Set("udp"); err == nil || !strings.Contains(err.Error(), "want auto, tcp, shm or inproc") {
		t.Errorf("Set(udp) = %v", err)
	}
}

// The default transport leaves the choice to the library (Init reads
// GOCOMM_TRANSPORT, else auto); the explicit ones force it. The labels
// say what auto chose.
func TestSelectTransport(t *testing.T) {
	for tr, want := range map[Transport]comm.TransportKind{TransportAuto: comm.TransportAuto, TransportTCP: comm.TransportTCP, TransportSHM: comm.TransportSHM, TransportInproc: comm.TransportAuto} {
		opts := comm.Options{Transport: comm.TransportOptions{Kind: "stale"}}
		if tr == TransportInproc {
			opts.Transport.Kind = comm.TransportAuto
		}
		if err := selectTransport(tr, &opts); err != nil || opts.Transport.Kind != want {
			t.Errorf("selectTransport(%v) = %q, %v; want %q", tr, opts.Transport.Kind, err, want)
		}
	}
	for _, tc := range []struct {
		t             Transport
		backend, mode string
		hosts, size   int
		label, desc   string
	}{
		{TransportAuto, "native", "", 1, 2, "native/auto-shm", "auto (the library's default: shared memory, every rank on this host)"},
		{TransportAuto, "native", "auto", 3, 4, "native/auto-shm+tcp", "auto (the library's default: shared memory within each of 3 hosts, TCP between them)"},
		{TransportAuto, "native", "", 3, 3, "native/auto-tcp", "auto (the library's default: TCP, every rank on a host of its own, 3 hosts)"},
		{TransportAuto, "native", "tcp", 1, 2, "native/auto-tcp", "auto (GOCOMM_TRANSPORT=tcp)"},
		{TransportAuto, "native", "", 0, 2, "native/auto", "auto (the library's default: shared memory between ranks of one host, TCP between hosts)"},
		{TransportAuto, "native", "", 1, 1, "native/auto", "auto (the library's default: shared memory between ranks of one host, TCP between hosts)"},
		{TransportAuto, "mpi", "", 1, 2, "mpi/auto", "auto"},
		{TransportTCP, "native", "shm", 1, 2, "native/tcp", "tcp"},
		{TransportSHM, "native", "", 1, 2, "native/shm", "shm"},
	} {
		if got := seriesLabel(tc.t, tc.backend, tc.mode, tc.hosts, tc.size); got != tc.label {
			t.Errorf("seriesLabel(%v, %s, %q, %d hosts, %d ranks) = %q, want %q", tc.t, tc.backend, tc.mode, tc.hosts, tc.size, got, tc.label)
		}
		if got := describeTransport(tc.t, tc.backend, tc.mode, tc.hosts, tc.size); got != tc.desc {
			t.Errorf("describeTransport(%v, %s, %q, %d hosts, %d ranks) = %q, want %q", tc.t, tc.backend, tc.mode, tc.hosts, tc.size, got, tc.desc)
		}
	}
}

func TestParseCompareArgs(t *testing.T) {
	cfg, err := ParseCompareArgs(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ranks != 2 || cfg.Runs != 3 || len(cfg.Series) != len(DefaultSeries) || cfg.Sweep.Budget != 1<<30 ||
		cfg.Python != "/usr/bin/python3" || len(cfg.Sweep.Ops) != 5 || cfg.Sweep.Ops[1] != (OpSpec{Op: Broadcast, Min: 64 << 20, Max: 64 << 20}) {
		t.Errorf("compare defaults = %+v", cfg)
	}
	for _, s := range []string{SeriesMPISHMBest, SeriesMPITCPBest} {
		if !slices.Contains(cfg.Series, s) || cfg.MPIAlgos != nil {
			t.Errorf("compare's default series %v lack %s, or try only %v", cfg.Series, s, cfg.MPIAlgos)
		}
	}
	cfg, err = ParseCompareArgs(strings.Fields("-n 4 --runs 5 --series gloo,gocomm-tcp,mpi-tcp-best --mpirun-args=--bind-to --op allreduce -e 1M -c "+
		"--mpi-algos allreduce=2,4-6 --mpi-algos bcast=1,1,3"), &bytes.Buffer{})
	if err != nil || cfg.Ranks != 4 || cfg.Runs != 5 || strings.Join(cfg.Series, ",") != "gloo,gocomm-tcp,mpi-tcp-best" ||
		strings.Join(cfg.MPIArgs, " ") != "--bind-to" || !cfg.Check || cfg.Sweep.Max != 1<<20 ||
		cfg.MPIAlgos.String() != "allreduce=2,4,5,6 broadcast=1,3" {
		t.Errorf("compare flags = %+v, %v", cfg, err)
	}
	if cfg, err := ParseCompareArgs(strings.Fields("--series mpi-backend,mpi-shm,mpi-shm-mt"), &bytes.Buffer{}); err != nil ||
		strings.Join(cfg.Series, ",") != "mpi-backend,mpi-shm,mpi-shm-mt" {
		t.Errorf("--series with mpi-shm-mt: %v, %v", cfg.Series, err)
	}
	for _, tt := range []struct{ args, want string }{
		{"--series nccl", "unknown series"},
		{"--series mpi-shm-mtx", "unknown series"},
		{"--series gloo,gloo", "twice"},
		{"--series ,", "no series"},
		{"--runs 0", "--runs"},
		{"-n 0", "-n 0"},
		{"--op allgather@2 -d float64", "no case"},
		{"--algo x=y", "unknown op"},
		{"--mpi-algos sendrecv=1", "no tuned algorithms for sendrecv"},
		{"--mpi-algos allreduce=0", "not an algorithm number"},
		{"--mpi-algos allreduce=4-2", "not an algorithm number"},
		{"--mpi-algos allreduce", "want op=K"},
		{"--mpi-algos nosuch=1", "unknown op"},
		{"extra", "unexpected"},
	} {
		if _, err := ParseCompareArgs(strings.Fields(tt.args), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCompareArgs(%q) error = %v; want one containing %q", tt.args, err, tt.want)
		}
	}
	var out bytes.Buffer
	if _, err := ParseCompareArgs([]string{"-h"}, &out); !errors.Is(err, ErrHelp) || !strings.Contains(out.String(), "btl self,vader") {
		t.Errorf("compare -h: %v\n%s", err, out.String())
	}
}
