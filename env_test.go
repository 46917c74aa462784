package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/rendezvous"
)

// envOf turns "K=V" pairs into a getenv.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// ReadEnvironment is package env's Read (the contract's own tests are
// there), and Init's resolve reports the same errors, unchanged.
func TestReadEnvironmentIsTheContract(t *testing.T) {
	for _, vars := range [][]string{
		nil,
		{"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "MASTER_ADDR=host0", "MASTER_PORT=29500",
			"TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RUN_ID=job7"},
		{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=j1"},
		{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_STEP_TASKS_PER_NODE=4(x2)",
			"SLURM_STEP_NODELIST=node[01-02]", "SLURMD_NODENAME=node02", "SLURM_JOB_ID=123456", "SLURM_STEP_ID=3"},
		{"RANK=0"},
		{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=70000"},
		{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=2(x"},
	} {
		got, err := ReadEnvironment(envOf(vars...))
		want, wantErr := env.Read(envOf(vars...))
		if !reflect.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("%v: ReadEnvironment = %+v, %v; env.Read = %+v, %v", vars, got, err, want, wantErr)
		}
		if wantErr == nil {
			continue
		}
		if !errors.Is(err, ErrEnvironment) {
			t.Errorf("%v: %v does not wrap ErrEnvironment", vars, err)
		}
		if _, err2 := resolve(Options{Getenv: envOf(vars...)}); err2 == nil || err2.Error() != wantErr.Error() {
			t.Errorf("%v: resolve: %v, want %v", vars, err2, wantErr)
		}
	}
}

func TestResolveKnobs(t *testing.T) {
	cfg, err := resolve(Options{Getenv: envOf(
		"GOCOMM_BACKEND=mine", "GOCOMM_TIMEOUT=90s", "GOCOMM_SECRET=s3cret", "GOCOMM_SOCKET_HOST=10.0.0.5",
		"GOCOMM_ALGO_ALLREDUCE=ring", "GOCOMM_DEBUG=1", "GOCOMM_PROFILE=1")})
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := algo.ParseAlgorithm("ring")
	if cfg.backend != "mine" || cfg.timeout != 90*time.Second || string(cfg.secret) != "s3cret" ||
		cfg.listenHost != "10.0.0.5" || cfg.algorithms.AllReduce != ring || cfg.logger == nil || cfg.profile != "1" || cfg.profiling == nil {
		t.Errorf("knobs not applied: %+v", cfg)
	}
	if cfg.size != 1 || cfg.rank != 0 || cfg.localSize != 1 || cfg.launcher != LauncherNone {
		t.Errorf("not a world of one: %+v", cfg)
	}

	for _, tt := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, DefaultTimeout},
		{[]string{"GOCOMM_TIMEOUT=2.5"}, 2500 * time.Millisecond},
		{[]string{"DEEPSPEED_TIMEOUT=5"}, 5 * time.Minute},
		{[]string{"DEEPSPEED_TIMEOUT=5", "GOCOMM_TIMEOUT=1m"}, time.Minute},
	} {
		cfg, err := resolve(Options{Getenv: envOf(tt.env...)})
		if err != nil || cfg.timeout != tt.want {
			t.Errorf("%v: timeout %v, %v; want %v", tt.env, cfg.timeout, err, tt.want)
		}
	}

	// Options win over the environment.
	cfg, err = resolve(Options{Backend: "native", Timeout: time.Second, Getenv: envOf("GOCOMM_BACKEND=x", "GOCOMM_TIMEOUT=1h", "GOCOMM_DEBUG=bogus-but-unused")})
	if err == nil {
		t.Errorf("GOCOMM_DEBUG=bogus accepted")
	}
	cfg, err = resolve(Options{Backend: "native", Timeout: time.Second, Getenv: envOf("GOCOMM_BACKEND=x", "GOCOMM_TIMEOUT=1h")})
	if err != nil || cfg.backend != "native" || cfg.timeout != time.Second {
		t.Errorf("Options overridden: %+v, %v", cfg, err)
	}

	for _, tt := range []struct {
		env  string
		opt  int
		want int
	}{
		{"", 0, 0}, {"GOCOMM_SHM_SINGLE_COPY=1048576", 0, 1 << 20}, {"GOCOMM_SHM_SINGLE_COPY=off", 0, -1},
		{"GOCOMM_SHM_SINGLE_COPY=0", 0, -1}, {"GOCOMM_SHM_SINGLE_COPY=off", 4096, 4096},
	} {
		cfg, err := resolve(Options{Transport: TransportOptions{SingleCopyBytes: tt.opt}, Getenv: envOf(tt.env)})
		if err != nil || cfg.transport.SingleCopyBytes != tt.want {
			t.Errorf("%q with Options %d: single copy from %d bytes, %v; want %d", tt.env, tt.opt, cfg.transport.SingleCopyBytes, err, tt.want)
		}
	}

	for _, tt := range []struct{ env, opt, want string }{
		{"", "", ""}, {"GOCOMM_SHM_STORES=cached", "", "cached"}, {"GOCOMM_SHM_STORES=bypass", "auto", "auto"},
	} {
		cfg, err := resolve(Options{Transport: TransportOptions{SHMStores: tt.opt}, Getenv: envOf(tt.env)})
		if err != nil || cfg.transport.SHMStores != tt.want {
			t.Errorf("%q with Options %q: stores %q, %v; want %q", tt.env, tt.opt, cfg.transport.SHMStores, err, tt.want)
		}
	}
	for _, tt := range []struct{ env, opt, want string }{
		{"", "", ""}, {"GOCOMM_TCP_CONGESTION=system", "", "system"}, {"GOCOMM_TCP_CONGESTION=system", "auto", "auto"},
	} {
		cfg, err := resolve(Options{Transport: TransportOptions{TCPCongestion: tt.opt}, Getenv: envOf(tt.env)})
		if err != nil || cfg.transport.TCPCongestion != tt.want {
			t.Errorf("%q with Options %q: congestion %q, %v; want %q", tt.env, tt.opt, cfg.transport.TCPCongestion, err, tt.want)
		}
	}

	for _, bad := range [][]string{
		{"GOCOMM_TIMEOUT=soon"}, {"DEEPSPEED_TIMEOUT=later"}, {"GOCOMM_DEBUG=loud"}, {"GOCOMM_ALGO_ALLREDUCE=magic"},
		{"GOCOMM_SHM_SINGLE_COPY=big"}, {"GOCOMM_SHM_SINGLE_COPY=-5"}, {"GOCOMM_SHM_STORES=fast"},
		{"GOCOMM_TCP_CONGESTION=warp9"},
		{"GOCOMM_SETTLE=soon"}, {"GOCOMM_SETTLE=-1ms"}, {"GOCOMM_SETTLE=2h"},
	} {
		_, err := resolve(Options{Getenv: envOf(bad...)})
		name, _, _ := strings.Cut(bad[0], "=")
		if !errors.Is(err, ErrEnvironment) || !strings.Contains(fmt.Sprint(err), name) {
			t.Errorf("%v: %v, want an ErrEnvironment naming %s", bad, err, name)
		}
	}
}

func TestResolveExplicitOptions(t *testing.T) {
	none := envOf()
	// Explicit Rank/Size with a Store need nothing else.
	cfg, err := resolve(Options{Rank: 1, Size: 3, Store: rendezvous.NewMemStore(), Getenv: none})
	if err != nil || cfg.rank != 1 || cfg.size != 3 || cfg.localRank != 1 || cfg.localSize != 3 || cfg.rdzv.Kind != RendezvousNone {
		t.Errorf("got %+v, %v", cfg, err)
	}
	// Explicit Rank/Size take the master from MASTER_ADDR/MASTER_PORT.
	cfg, err = resolve(Options{Rank: 0, Size: 2, Getenv: envOf("MASTER_ADDR=127.0.0.1", "MASTER_PORT=1234", "RANK=7", "WORLD_SIZE=9")})
	if err != nil || cfg.rdzv.Kind != RendezvousTCP || cfg.rdzv.Addr != "127.0.0.1:1234" || cfg.size != 2 {
		t.Errorf("got %+v, %v", cfg, err)
	}
	// Options.MasterAddr/MasterPort override the environment's.
	cfg, err = resolve(Options{MasterAddr: "10.0.0.2", MasterPort: 999, Getenv: envOf("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=a", "MASTER_PORT=1")})
	if err != nil || cfg.rdzv.Addr != "10.0.0.2:999" || cfg.rdzv.Kind != RendezvousTCP {
		t.Errorf("got %+v, %v", cfg, err)
	}
	// Under torchrun's agent store the override keeps the agent kind and prefix.
	cfg, err = resolve(Options{MasterPort: 999, Getenv: envOf("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=a", "MASTER_PORT=1", "TORCHELASTIC_USE_AGENT_STORE=True")})
	if err != nil || cfg.rdzv.Addr != "a:999" || cfg.rdzv.Kind != RendezvousAgent || cfg.rdzv.Prefix == "" {
		t.Errorf("got %+v, %v", cfg, err)
	}
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{Rank: 0, Size: 2, Getenv: none}, "world of 2 ranks but no rendezvous: set MASTER_ADDR and MASTER_PORT"},
		{Options{Rank: 2, Size: 2, Getenv: none}, "rank 2 out of range for world size 2"},
		{Options{Rank: 0, Size: -1, Getenv: none}, "world size -1"},
		{Options{Rank: 0, Size: 2, MasterPort: 5, Getenv: none}, "Options.MasterPort is set but not the master's host"},
		{Options{Rank: 0, Size: 2, MasterAddr: "h", Getenv: none}, "master port 0 is not a TCP port"},
		{Options{Rank: 0, Size: 2, Getenv: envOf("MASTER_ADDR=h")}, "MASTER_PORT is not"},
	} {
		_, err := resolve(tt.opts)
		if !errors.Is(err, ErrEnvironment) || !strings.Contains(fmt.Sprint(err), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.opts, err, tt.want)
		}
	}
	// GOCOMM_INIT_METHOD with explicit ranks.
	cfg, err = resolve(Options{Rank: 0, Size: 2, Getenv: envOf("GOCOMM_INIT_METHOD=file:///tmp/x.store")})
	if err != nil || cfg.rdzv.Kind != RendezvousFile || cfg.rdzv.Path != "/tmp/x.store" {
		t.Errorf("got %+v, %v", cfg, err)
	}
}

// initWorld runs Init on n goroutines with per-rank environments.
func initWorld(t *testing.T, n int, env func(rank int) []string) []*Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			w[r], errs[r] = Init(ctx, Options{Transport: TransportOptions{ListenHost: "127.0.0.1"}, Timeout: 20 * time.Second, Getenv: envOf(env(r)...)})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, c := range w {
				if c != nil {
					c.Close()
				}
			}
			t.Fatalf("rank %d: Init: %v", r, err)
		}
	}
	return w
}

func allReduceAll(t *testing.T, w []*Comm) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(w))
	got := make([]float64, len(w))
	for r, c := range w {
		wg.Go(func() {
			buf := []float64{float64(r + 1)}
			errs[r] = AllReduce(ctx, c, buf, buf, Sum)
			got[r] = buf[0]
		})
	}
	wg.Wait()
	n := len(w)
	for r := range w {
		if errs[r] != nil || got[r] != float64(n*(n+1)/2) {
			t.Errorf("rank %d: all-reduce %v, %v", r, got[r], errs[r])
		}
	}
}

func closeWorld(t *testing.T, w []*Comm) {
	t.Helper()
	var wg sync.WaitGroup
	for r, c := range w {
		wg.Go(func() {
			if err := c.Close(); err != nil {
				t.Errorf("rank %d: Close: %v", r, err)
			}
		})
	}
	wg.Wait()
}

// Open MPI on one host: the ranks meet in a file store named by the job id,
// and the last rank to close removes it.
func TestInitFileStoreFromOpenMPI(t *testing.T) {
	job := fmt.Sprintf("test%d-%d", os.Getpid(), time.Now().UnixNano())
	path := filepath.Join(os.TempDir(), "gocomm-openmpi-"+job+".store")
	w := initWorld(t, 3, func(r int) []string {
		return []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=3",
			"OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_SIZE=3",
			"OMPI_MCA_ess_base_jobid=" + job}
	})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("store file: %v", err)
	}
	allReduceAll(t, w)
	closeWorld(t, w)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store file left behind after every rank closed: %v", err)
	}
}

// Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent hosts the
// store: every rank, rank 0 included, joins it as a client, under a prefix
// per restart attempt.
func TestInitJoinsAgentStore(t *testing.T) {
	agent, err := rendezvous.ListenTCPStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	_, port, _ := net.SplitHostPort(agent.Addr().String())
	w := initWorld(t, 2, func(r int) []string {
		return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK=" + strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
			"GROUP_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port,
			"TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RESTART_COUNT=1", "TORCHELASTIC_RUN_ID=r9"}
	})
	allReduceAll(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	probe, err := rendezvous.DialTCPStore(ctx, agent.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	n, err := probe.NumKeys(ctx)
	if err != nil || n == 0 {
		t.Errorf("agent store holds %d keys (%v): the ranks did not meet there", n, err)
	}
	ok, err := probe.Check(ctx, "gocomm/torchelastic/r9/attempt_1/gocomm/native/addr/0")
	if err != nil || !ok {
		t.Errorf("rank 0's address is not under the attempt's prefix: %v, %v", ok, err)
	}
	closeWorld(t, w)
	// The agent's store outlives the workers.
	if _, err := probe.NumKeys(ctx); err != nil {
		t.Errorf("agent store gone after the workers closed: %v", err)
	}
}

// A rank 0 that cannot reach its meeting place says where it looked and why.
func TestInitRendezvousErrorNamesThePlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := Init(ctx, Options{Getenv: envOf("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1")})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "MASTER_ADDR:MASTER_PORT") ||
		!errors.Is(err, rendezvous.ErrMasterUnreachable) {
		t.Errorf("got %v", err)
	}
}
