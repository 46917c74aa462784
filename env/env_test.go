package env

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
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
// srun), with what Read must make of them.
func TestReadLaunchers(t *testing.T) {
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
			got, err := Read(envOf(tt.env...))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Every incomplete or malformed environment is an ErrEnvironment naming the
// variable at fault and what to set.
func TestReadErrors(t *testing.T) {
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
			_, err := Read(envOf(tt.env...))
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

// An MPI job on several hosts with no other meeting place meets through
// MPI only in a program that says it can (Reader.MPIBootstrap); a meeting
// place in the variables still wins.
func TestReadMPIBootstrap(t *testing.T) {
	multi := []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}
	for _, vars := range [][]string{multi, {"PMI_RANK=0", "PMI_SIZE=4", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2"}} {
		got, err := Reader{Getenv: envOf(vars...), MPIBootstrap: true}.Read()
		if err != nil || got.Rendezvous.Kind != RendezvousMPI {
			t.Errorf("%v with MPIBootstrap: %+v, %v; want RendezvousMPI", vars, got.Rendezvous, err)
		}
		if _, err := Read(envOf(vars...)); !errors.Is(err, ErrEnvironment) || !strings.Contains(err.Error(), "build with -tags mpi") {
			t.Errorf("%v without MPIBootstrap: %v; want an ErrEnvironment saying to build with -tags mpi", vars, err)
		}
	}
	got, err := Reader{Getenv: envOf(append(multi, "MASTER_ADDR=n1", "MASTER_PORT=29500")...), MPIBootstrap: true}.Read()
	if err != nil || got.Rendezvous.Kind != RendezvousTCP || got.Rendezvous.Addr != "n1:29500" {
		t.Errorf("MASTER_ADDR/PORT with MPIBootstrap: %+v, %v; want TCP at n1:29500", got.Rendezvous, err)
	}
	// Every rank on one host: a file store, MPI or not.
	one := []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=j1"}
	if got, err := (Reader{Getenv: envOf(one...), MPIBootstrap: true}).Read(); err != nil || got.Rendezvous.Kind != RendezvousFile {
		t.Errorf("one host with MPIBootstrap: %+v, %v; want a file store", got.Rendezvous, err)
	}
}

func TestHostAddr(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"127.0.0.1:29500", "127.0.0.1:29500"},
		{"localhost:1", "localhost:1"},
		{"[::1]:7", "[::1]:7"},
		{"node0:29500", ":29500"},
		{"10.0.0.2:4000", ":4000"},
		{"[fe80::1]:5", ":5"},
	} {
		if got := (Rendezvous{Kind: RendezvousTCP, Addr: tt.addr}).HostAddr(); got != tt.want {
			t.Errorf("HostAddr of %s = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestReaderGetAndInt(t *testing.T) {
	e := Reader{Getenv: envOf("A= 12 ", "B=x")}
	if got := e.Get("A"); got != "12" {
		t.Errorf("Get(A) = %q, want 12 (trimmed)", got)
	}
	if n, err := e.Int("A"); n != 12 || err != nil {
		t.Errorf("Int(A) = %d, %v; want 12", n, err)
	}
	if n, err := e.Int("unset"); n != 0 || err != nil {
		t.Errorf("Int(unset) = %d, %v; want 0, nil", n, err)
	}
	if _, err := e.Int("B"); !errors.Is(err, ErrEnvironment) || !strings.Contains(err.Error(), `B="x" is not an integer`) {
		t.Errorf("Int(B) = %v; want an ErrEnvironment naming B", err)
	}
	t.Setenv("GOCOMM_ENV_TEST_VAR", "v")
	if got := (Reader{}).Get("GOCOMM_ENV_TEST_VAR"); got != "v" {
		t.Errorf("zero Reader's Get = %q, want os.Getenv's v", got)
	}
}

// A launcher that replaces TorchVars leaves nothing of an enclosing
// torchrun or DeepSpeed launcher for Read to misread: the ranks it starts
// read only what it sets.
func TestTorchVarsCoverTheFamily(t *testing.T) {
	enclosing := []string{"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_SIZE=4", "LOCAL_WORLD_SIZE=4", "CROSS_RANK=1",
		"GROUP_RANK=1", "MASTER_ADDR=10.1.1.1", "MASTER_PORT=29500", "TORCHELASTIC_USE_AGENT_STORE=True",
		"TORCHELASTIC_RUN_ID=r", "TORCHELASTIC_RESTART_COUNT=3", "HOME=/root"}
	drop := map[string]bool{}
	for _, v := range TorchVars() {
		drop[v] = true
	}
	var kept []string
	for _, kv := range enclosing {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			kept = append(kept, kv)
		}
	}
	if got, err := Read(envOf(kept...)); err != nil || got.Launcher != LauncherNone {
		t.Errorf("after dropping TorchVars %v is read as %+v, %v; want no launcher", kept, got, err)
	}
	// The new launcher sets only the core variables: nothing stale shows.
	got, err := Read(envOf(append(kept, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1234")...))
	want := Environment{Launcher: LauncherTorch, Size: 2, LocalSize: 2, NodeRank: -1,
		Rendezvous: Rendezvous{Kind: RendezvousTCP, Addr: "127.0.0.1:1234", From: "MASTER_ADDR:MASTER_PORT"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestJobIdentity(t *testing.T) {
	for _, tc := range []struct {
		vars     []string
		id, from string
	}{
		{nil, "", ""},
		{[]string{"TORCHELASTIC_RUN_ID=none"}, "", ""},
		{[]string{"TORCHELASTIC_RUN_ID=job7", "SLURM_JOB_ID=12"}, "job7", EnvRunID},
		{[]string{"SLURM_JOB_ID=12", "SLURM_STEP_ID=3"}, "12.3", EnvSlurmJobID},
		{[]string{"PMIX_NAMESPACE=prterun-h-1@1"}, "prterun-h-1@1", "PMIX_NAMESPACE"},
	} {
		id, from := Reader{Getenv: envOf(tc.vars...)}.JobIdentity()
		if id != tc.id || from != tc.from {
			t.Errorf("%v: JobIdentity() = %q, %q; want %q, %q", tc.vars, id, from, tc.id, tc.from)
		}
	}
}

func TestParseInitMethodEtcd(t *testing.T) {
	good := []struct {
		in   string
		want Rendezvous
	}{
		{"etcd://127.0.0.1:2379/gocomm/job-42", Rendezvous{Kind: RendezvousEtcd, Addr: "127.0.0.1:2379",
			Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/gocomm/job-42", From: EnvInitMethod}},
		{"etcd://e1:2379,e2:2379,[::1]:2380/jobs/7/?ttl=5s", Rendezvous{Kind: RendezvousEtcd, Addr: "e1:2379,e2:2379,[::1]:2380",
			Endpoints: []string{"e1:2379", "e2:2379", "[::1]:2380"}, Prefix: "/jobs/7", LeaseTTL: 5 * time.Second, From: EnvInitMethod}},
	}
	for _, tc := range good {
		got, err := ParseInitMethod(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseInitMethod(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"etcd://", "no etcd endpoint"},
		{"etcd:///job", "no etcd endpoint"},
		{"etcd:host:2379/job", "no etcd endpoint"},
		{"etcd://host/job", `endpoint "host" is not host:port`},
		{"etcd://host:0/job", "no TCP port"},
		{"etcd://host:99999/job", "no TCP port"},
		{"etcd://:2379/job", "is not host:port"},
		{"etcd://a:1,,b:2/job", `endpoint "" is not host:port`},
		{"etcd://host:2379", "no key prefix"},
		{"etcd://host:2379/", "no key prefix"},
		{"etcd://host:2379///", "no key prefix"},
		{"etcd://u:p@host:2379/job", "passwords are not supported"},
		{"etcd://host:2379/job?ttl=0s", "ttl="},
		{"etcd://host:2379/job?ttl=soon", "ttl="},
		{"etcd://host:2379/job?ttl=1s&ttl=2s", "repeated parameter"},
		{"etcd://host:2379/job?tls=1", `unknown or repeated parameter "tls"`},
		{"etcd://host:2379/job#x", "fragment"},
		{"etcd://host:2379/job?%zz", "unreadable"},
		{"etcd://host:2379/%zz", "unreadable"},
		{"etcd://[::1/job", "is not host:port"},
		{"etcd://host:2379?ttl=1s", "no key prefix"},
	}
	for _, tc := range bad {
		_, err := ParseInitMethod(tc.in)
		if err == nil || !errors.Is(err, ErrEnvironment) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseInitMethod(%q) = %v; want an ErrEnvironment saying %q", tc.in, err, tc.want)
		}
	}
	if RendezvousEtcd.String() != "etcd" {
		t.Errorf("RendezvousEtcd.String() = %q", RendezvousEtcd.String())
	}
	// The launcher's world, met in etcd.
	w, err := Read(envOf("RANK=1", "WORLD_SIZE=3", "GOCOMM_INIT_METHOD=etcd://10.0.0.5:2379/jobs/a"))
	if err != nil || w.Rendezvous.Kind != RendezvousEtcd || w.Rendezvous.Prefix != "/jobs/a" {
		t.Errorf("Read with an etcd init method: %+v, %v", w.Rendezvous, err)
	}
}

// ParseInitMethod never panics, and what it accepts is usable.
func FuzzParseInitMethod(f *testing.F) {
	for _, s := range []string{"etcd://h:1/p", "etcd://a:1,b:2/p?ttl=3s", "tcp://h:1", "file:///x", "etcd://[::1]:2/p", "etcd://h:1/%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseInitMethod(s)
		if err != nil {
			if !errors.Is(err, ErrEnvironment) {
				t.Fatalf("%q: error not wrapping ErrEnvironment: %v", s, err)
			}
			return
		}
		if r.Kind == RendezvousEtcd && (len(r.Endpoints) == 0 || r.Prefix == "") {
			t.Fatalf("%q: accepted without endpoints or prefix: %+v", s, r)
		}
	})
}
