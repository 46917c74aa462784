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

// The variables each launcher really sets (torch 1.13's agent, DeepSpeed's
// launcher, a Kubeflow PyTorchJob, Open MPI 4.1's mpirun, MPICH's Hydra,
// srun), with what Init must make of them.
func TestReadEnvironmentLaunchers(t *testing.T) {
	tmp := os.TempDir()
	tests := []struct {
		name string
		env  []string
		want Environment
	}{
		{
			name: "no launcher",
			env:  []string{"HOME=/root", "MASTER_ADDR=10.0.0.1"},
			want: Environment{Launcher: LauncherNone, Size: 1, LocalSize: 1, NodeRank: -1},
		},
		{
			name: "torchrun static rendezvous: the agent hosts the store",
			env: []string{
				"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "GROUP_WORLD_SIZE=2",
				"ROLE_RANK=3", "ROLE_NAME=default", "ROLE_WORLD_SIZE=4", "MASTER_ADDR=host0", "MASTER_PORT=29500",
				"TORCHELASTIC_RESTART_COUNT=2", "TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RUN_ID=none",
				"TORCHELASTIC_USE_AGENT_STORE=True",
			},
			want: Environment{Launcher: LauncherTorch, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, NodeRank: 1,
				Rendezvous: Rendezvous{Kind: RendezvousAgent, Addr: "host0:29500", Prefix: "gocomm/torchelastic/none/attempt_2",
					From: "torchrun's agent store at MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True)"}},
		},
		{
			name: "torchrun --standalone: rank 0 hosts",
			env: []string{
				"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0",
				"MASTER_ADDR=vm.example", "MASTER_PORT=41234", "TORCHELASTIC_USE_AGENT_STORE=False",
			},
			want: Environment{Launcher: LauncherTorch, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, NodeRank: 0,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "vm.example:41234", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "commrun",
			env: []string{"RANK=1", "WORLD_SIZE=3", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=3", "GROUP_RANK=0",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=40000"},
			want: Environment{Launcher: LauncherTorch, Rank: 1, Size: 3, LocalRank: 1, LocalSize: 3, NodeRank: 0,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "127.0.0.1:40000", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "DeepSpeed launcher: LOCAL_SIZE and CROSS_RANK",
			env: []string{"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_SIZE=4", "CROSS_RANK=1", "CROSS_SIZE=2",
				"MASTER_ADDR=10.1.1.1", "MASTER_PORT=29500"},
			want: Environment{Launcher: LauncherTorch, Rank: 5, Size: 8, LocalRank: 1, LocalSize: 4, NodeRank: 1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "10.1.1.1:29500", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "Kubeflow PyTorchJob: one rank per pod",
			env:  []string{"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "PYTHONUNBUFFERED=0"},
			want: Environment{Launcher: LauncherTorch, Rank: 2, Size: 4, LocalRank: 0, LocalSize: 1, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "job-master-0:23456", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "RANK and WORLD_SIZE by hand on loopback: all local",
			env:  []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"},
			want: Environment{Launcher: LauncherTorch, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "127.0.0.1:29500", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "Open MPI on one host: a file store named by the job id",
			env: []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_NODE_RANK=1", "OMPI_MCA_ess_base_jobid=879296513",
				"PMIX_NAMESPACE=879296513", "PMIX_RANK=1", "OMPI_UNIVERSE_SIZE=2"},
			want: Environment{Launcher: LauncherOpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousFile, Path: filepath.Join(tmp, "gocomm-openmpi-879296513.store"),
					From: "a file store in " + tmp + " named by OMPI_MCA_ess_base_jobid (every rank on one host)"}},
		},
		{
			name: "Open MPI 5 (PMIx namespace only)",
			env: []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=prterun-vm-4242@1"},
			want: Environment{Launcher: LauncherOpenMPI, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousFile, Path: filepath.Join(tmp, "gocomm-openmpi-prterun-vm-4242_1.store"),
					From: "a file store in " + tmp + " named by PMIX_NAMESPACE (every rank on one host)"}},
		},
		{
			name: "Open MPI across hosts with MASTER_ADDR/MASTER_PORT (mpirun -x)",
			env: []string{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "MASTER_ADDR=n1", "MASTER_PORT=29500"},
			want: Environment{Launcher: LauncherOpenMPI, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "n1:29500", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "Open MPI across hosts inside a SLURM allocation",
			env: []string{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "SLURM_JOB_NODELIST=cn[07-08]", "SLURM_JOB_ID=77", "SLURM_STEP_ID=0",
				"SLURM_STEP_NODELIST=cn08", "SLURM_PROCID=0"},
			want: Environment{Launcher: LauncherOpenMPI, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "cn07:" + strconv.Itoa(slurmPort(77, 0)),
					From: "the first host of SLURM_JOB_NODELIST and a port derived from SLURM_JOB_ID=77"}},
		},
		{
			name: "MPICH Hydra on one host: a file store named by the parent (proxy)",
			env:  []string{"PMI_RANK=2", "PMI_SIZE=4", "MPI_LOCALRANKID=2", "MPI_LOCALNRANKS=4", "PMI_FD=6"},
			want: Environment{Launcher: LauncherPMI, Rank: 2, Size: 4, LocalRank: 2, LocalSize: 4, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousFile, Path: filepath.Join(tmp, "gocomm-mpich-"+parentID()+".store"),
					From: "a file store in " + tmp + " named by the parent process (the launcher) id (every rank on one host)"}},
		},
		{
			name: "srun: first host of the step's node list, port from the job id",
			env: []string{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_STEP_NUM_TASKS=8", "SLURM_LOCALID=1",
				"SLURM_NODEID=1", "SLURM_STEP_TASKS_PER_NODE=4(x2)", "SLURM_TASKS_PER_NODE=4(x2)",
				"SLURM_STEP_NODELIST=node[01-02]", "SLURM_JOB_NODELIST=node[01-02]", "SLURMD_NODENAME=node02",
				"SLURM_JOB_ID=123456", "SLURM_STEP_ID=3", "SLURM_STEPID=3"},
			want: Environment{Launcher: LauncherSlurm, Rank: 5, Size: 8, LocalRank: 1, LocalSize: 4, NodeRank: 1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "node01:" + strconv.Itoa(slurmPort(123456, 3)),
					From: "the first host of SLURM_STEP_NODELIST and a port derived from SLURM_JOB_ID=123456"}},
		},
		{
			name: "srun with uneven tasks per node: this node's count",
			env: []string{"SLURM_PROCID=6", "SLURM_NTASKS=7", "SLURM_LOCALID=0", "SLURM_NODEID=2",
				"SLURM_STEP_TASKS_PER_NODE=3(x2),1", "SLURM_STEP_NODELIST=gpu-[1-3]", "SLURMD_NODENAME=gpu-3",
				"SLURM_JOB_ID=9", "SLURM_STEP_ID=0"},
			want: Environment{Launcher: LauncherSlurm, Rank: 6, Size: 7, LocalRank: 0, LocalSize: 1, NodeRank: 2,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "gpu-1:" + strconv.Itoa(slurmPort(9, 0)),
					From: "the first host of SLURM_STEP_NODELIST and a port derived from SLURM_JOB_ID=9"}},
		},
		{
			name: "sbatch script (no step): one process, a world of one",
			env:  []string{"SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=n[1-2]"},
			want: Environment{Launcher: LauncherNone, Size: 1, LocalSize: 1, NodeRank: -1},
		},
		{
			name: "torchrun variables win over srun's",
			env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
				"MASTER_PORT=5000", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0", "SLURM_LOCALID=0"},
			want: Environment{Launcher: LauncherTorch, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "127.0.0.1:5000", From: "MASTER_ADDR:MASTER_PORT"}},
		},
		{
			name: "GOCOMM_INIT_METHOD file:// on several hosts",
			env: []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "GOCOMM_INIT_METHOD=file:///shared/job7.store"},
			want: Environment{Launcher: LauncherOpenMPI, Rank: 0, Size: 4, LocalRank: 0, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousFile, Path: "/shared/job7.store", From: "GOCOMM_INIT_METHOD"}},
		},
		{
			name: "GOCOMM_INIT_METHOD tcp:// wins over MASTER_*",
			env: []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=a", "MASTER_PORT=1",
				"GOCOMM_INIT_METHOD=tcp://10.0.0.9:4000"},
			want: Environment{Launcher: LauncherTorch, Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, NodeRank: -1,
				Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "10.0.0.9:4000", From: "GOCOMM_INIT_METHOD"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadEnvironment(envOf(tt.env...))
			if err != nil {
				t.Fatalf("ReadEnvironment: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Every incomplete or malformed environment is an ErrEnvironment naming the
// variable at fault and what to set.
func TestReadEnvironmentErrors(t *testing.T) {
	multiOMPI := []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}
	srun := []string{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", "SLURM_STEP_TASKS_PER_NODE=2(x2)",
		"SLURM_NODEID=0", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_JOB_ID=42", "SLURMD_NODENAME=n1"}
	replace := func(base []string, kv ...string) []string {
		out := append([]string(nil), base...)
		for _, s := range kv {
			k, _, _ := strings.Cut(s, "=")
			found := false
			for i, b := range out {
				if strings.HasPrefix(b, k+"=") {
					out[i], found = s, true
				}
			}
			if !found {
				out = append(out, s)
			}
		}
		return out
	}
	tests := []struct {
		name string
		env  []string
		want []string // substrings of the message
	}{
		{"RANK without WORLD_SIZE", []string{"RANK=0"}, []string{"RANK is set but WORLD_SIZE is not", "set WORLD_SIZE"}},
		{"WORLD_SIZE without RANK", []string{"WORLD_SIZE=4"}, []string{"WORLD_SIZE is set but RANK is not", "set RANK"}},
		{"LOCAL_RANK alone", []string{"LOCAL_RANK=1"}, []string{"LOCAL_RANK=1 is set but RANK and WORLD_SIZE are not"}},
		{"LOCAL_RANK without LOCAL_WORLD_SIZE", []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=1"},
			[]string{"LOCAL_RANK is set but LOCAL_WORLD_SIZE is not"}},
		{"LOCAL_WORLD_SIZE without LOCAL_RANK", []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1"},
			[]string{"LOCAL_WORLD_SIZE is set but LOCAL_RANK is not"}},
		{"RANK not a number", []string{"RANK=zero", "WORLD_SIZE=2"}, []string{`RANK="zero" is not an integer`}},
		{"RANK out of range", []string{"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1"}, []string{"rank 2 out of range for world size 2"}},
		{"WORLD_SIZE zero", []string{"RANK=0", "WORLD_SIZE=0"}, []string{"world size 0, want >= 1"}},
		{"LOCAL_WORLD_SIZE over WORLD_SIZE", []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=3"},
			[]string{"local world size 3, want 1..2"}},
		{"no MASTER_ADDR/PORT", []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2"},
			[]string{"MASTER_ADDR and MASTER_PORT are not set", "WORLD_SIZE=2"}},
		{"MASTER_PORT without MASTER_ADDR", []string{"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29500"},
			[]string{"MASTER_PORT=29500 is set but MASTER_ADDR is not", "127.0.0.1"}},
		{"MASTER_ADDR without MASTER_PORT", []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h"},
			[]string{"MASTER_ADDR=h is set but MASTER_PORT is not", "free TCP port"}},
		{"MASTER_PORT not a port", []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=70000"},
			[]string{`MASTER_PORT="70000" is not a TCP port`}},
		{"OMPI rank without size", []string{"OMPI_COMM_WORLD_RANK=0"}, []string{"OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"}},
		{"OMPI without local variables", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"},
			[]string{"OMPI_COMM_WORLD_LOCAL_RANK and OMPI_COMM_WORLD_LOCAL_SIZE are not"}},
		{"OMPI on several hosts without a meeting place", multiOMPI,
			[]string{"several hosts started by openmpi", "set MASTER_ADDR and MASTER_PORT", "mpirun -x MASTER_ADDR", "GOCOMM_INIT_METHOD=file://"}},
		{"PMI size without rank", []string{"PMI_SIZE=4"}, []string{"PMI_SIZE is set but PMI_RANK is not"}},
		{"MPICH on several hosts", []string{"PMI_RANK=0", "PMI_SIZE=4", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2"},
			[]string{"several hosts started by mpich", "mpiexec -genv MASTER_ADDR"}},
		{"srun without SLURM_NTASKS", replace(srun, "SLURM_NTASKS="), []string{"SLURM_PROCID=0 is set but SLURM_NTASKS is not"}},
		{"srun without SLURM_LOCALID", replace(srun, "SLURM_LOCALID="), []string{"SLURM_LOCALID is not"}},
		{"srun without tasks per node", replace(srun, "SLURM_STEP_TASKS_PER_NODE="), []string{"SLURM_STEP_TASKS_PER_NODE is not set"}},
		{"srun with a bad tasks-per-node list", replace(srun, "SLURM_STEP_TASKS_PER_NODE=2(x"), []string{`SLURM_STEP_TASKS_PER_NODE="2(x"`}},
		{"srun without a node list", replace(srun, "SLURM_STEP_NODELIST="), []string{"neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set"}},
		{"srun with a broken node list", replace(srun, "SLURM_STEP_NODELIST=n[1-", "SLURMD_NODENAME="), []string{"SLURM_STEP_NODELIST", "'[' without ']'", "set MASTER_ADDR and MASTER_PORT instead"}},
		{"srun without a job id", replace(srun, "SLURM_JOB_ID="), []string{"SLURM_JOB_ID is not", "no store port"}},
		{"srun rank 0 not on the first node", replace(srun, "SLURMD_NODENAME=n2", "SLURM_NODEID=1"),
			[]string{"rank 0 runs on n2, not on n1", "set MASTER_ADDR"}},
		{"bad GOCOMM_INIT_METHOD", []string{"RANK=0", "WORLD_SIZE=2", "GOCOMM_INIT_METHOD=nfs://x"}, []string{`GOCOMM_INIT_METHOD="nfs://x"`, "tcp://host:port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadEnvironment(envOf(tt.env...))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrEnvironment) {
				t.Errorf("error does not wrap ErrEnvironment: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// resolve reports the same.
			if _, err2 := resolve(Options{Getenv: envOf(tt.env...)}); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("resolve: %v, want %v", err2, err)
			}
		})
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"node01", []string{"node01"}},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
		{"a,b", []string{"a", "b"}},
		{" a , b[1-2] ", []string{"a", "b1", "b2"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[098-101]", []string{"n098", "n099", "n100", "n101"}},
		{"r[1-2]n[01-02]", []string{"r1n01", "r1n02", "r2n01", "r2n02"}},
		{"gpu-[1-2]-ib,cpu[3]", []string{"gpu-1-ib", "gpu-2-ib", "cpu3"}},
		{"x[1,3-4]y", []string{"x1y", "x3y", "x4y"}},
	}
	for _, tt := range tests {
		got, err := expandHostlist(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("expandHostlist(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", ",", "node[01-", "node]", "node[a-b]", "node[5-3]", "n[[1]]", "n[]", "n[1-]", "n[0-99999999]", "a[0-9999]b[0-9999]"} {
		if got, err := expandHostlist(bad); err == nil {
			t.Errorf("expandHostlist(%q) = %q, want an error", bad, got)
		}
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[01-04,07]", "a,b[1-2]c[3-4]", "n[", "]", "x[1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := expandHostlist(s)
		if err == nil && (len(hosts) == 0 || len(hosts) > maxHosts) {
			t.Fatalf("%q: %d hosts", s, len(hosts))
		}
	})
}

func TestExpandTasksPerNode(t *testing.T) {
	got, err := expandTasksPerNode("X", "2(x3),1,4")
	if want := []int{2, 2, 2, 1, 4}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "x", "2(x0)", "0", "2(x", "2(x99999999)"} {
		if _, err := expandTasksPerNode("X", bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSlurmPortRange(t *testing.T) {
	seen := map[int]bool{}
	for job := uint64(1_000_000); job < 1_000_000+1250; job++ {
		for step := uint64(0); step < 16; step++ {
			p := slurmPort(job, step)
			if p < 10000 || p >= 30000 || seen[p] {
				t.Fatalf("job %d step %d: port %d (out of range or taken)", job, step, p)
			}
			seen[p] = true
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
		cfg, err := resolve(Options{SingleCopyBytes: tt.opt, Getenv: envOf(tt.env)})
		if err != nil || cfg.transport.SingleCopyBytes != tt.want {
			t.Errorf("%q with Options %d: single copy from %d bytes, %v; want %d", tt.env, tt.opt, cfg.transport.SingleCopyBytes, err, tt.want)
		}
	}

	for _, bad := range [][]string{
		{"GOCOMM_TIMEOUT=soon"}, {"DEEPSPEED_TIMEOUT=later"}, {"GOCOMM_DEBUG=loud"}, {"GOCOMM_ALGO_ALLREDUCE=magic"},
		{"GOCOMM_SHM_SINGLE_COPY=big"}, {"GOCOMM_SHM_SINGLE_COPY=-5"},
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
			w[r], errs[r] = Init(ctx, Options{ListenHost: "127.0.0.1", Timeout: 20 * time.Second, Getenv: envOf(env(r)...)})
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

func ExampleReadEnvironment() {
	// What torchrun --nnodes 2 --nproc_per_node 2 gives the second rank of
	// node 0 (os.Getenv in a real program: pass nil).
	vars := map[string]string{
		"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
		"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True",
		"TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_RUN_ID": "job7",
	}
	env, err := ReadEnvironment(func(k string) string { return vars[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v: rank %d of %d, local %d of %d, node %d\n", env.Launcher, env.Rank, env.Size, env.LocalRank, env.LocalSize, env.NodeRank)
	fmt.Printf("meet: %v store at %s, keys under %s\n", env.Rendezvous.Kind, env.Rendezvous.Addr, env.Rendezvous.Prefix)

	_, err = ReadEnvironment(func(k string) string { return map[string]string{"OMPI_COMM_WORLD_RANK": "3"}[k] })
	fmt.Println(err)
	// Output:
	// env://: rank 1 of 4, local 1 of 2, node 0
	// meet: agent-tcp store at 10.0.0.1:29500, keys under gocomm/torchelastic/job7/attempt_0
	// comm: environment: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not: Open MPI's mpirun sets both; set OMPI_COMM_WORLD_SIZE to the number of ranks (or unset OMPI_COMM_WORLD_RANK for a world of one)
}
