package env

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// slurmStep is the step id of a SLURM job step, "" outside a step.
func (e Reader) slurmStep() string {
	_, v := e.first(EnvSlurmStepID, "SLURM_STEPID")
	return v
}

// readSlurm reads the variables srun gives each task of a step.
func (e Reader) readSlurm(env *Environment) error {
	var err error
	if env.Rank, err = intOf(EnvSlurmProcID, e.Get(EnvSlurmProcID)); err != nil {
		return err
	}
	name, v := e.first("SLURM_STEP_NUM_TASKS", EnvSlurmNTasks, "SLURM_NPROCS")
	if v == "" {
		return Errorf("%s=%d is set but %s is not: srun sets it; set it to the number of tasks (ranks) of the step", EnvSlurmProcID, env.Rank, EnvSlurmNTasks)
	}
	if env.Size, err = intOf(name, v); err != nil {
		return err
	}
	lv := e.Get(EnvSlurmLocalID)
	if lv == "" {
		return Errorf("%s=%d is set but %s is not: srun sets it; set it to this task's index among the tasks of its node", EnvSlurmProcID, env.Rank, EnvSlurmLocalID)
	}
	if env.LocalRank, err = intOf(EnvSlurmLocalID, lv); err != nil {
		return err
	}
	if v := e.Get(EnvSlurmNodeID); v != "" {
		if env.NodeRank, err = intOf(EnvSlurmNodeID, v); err != nil {
			return err
		}
	}
	env.LocalSize, err = e.slurmLocalSize(env)
	return err
}

// slurmLocalSize finds how many tasks of the step run on this node, from
// the tasks-per-node list ("2(x3),1") and this node's place in the step.
func (e Reader) slurmLocalSize(env *Environment) (int, error) {
	name, v := e.first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	if v == "" {
		if _, n := e.first("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"); n == "1" {
			return env.Size, nil
		}
		return 0, Errorf("SLURM step of %d tasks but SLURM_STEP_TASKS_PER_NODE is not set: srun sets it; set it (e.g. 4(x2) for 4 tasks on each of 2 nodes) or set LOCAL_WORLD_SIZE with the torchrun variables", env.Size)
	}
	perNode, err := expandTasksPerNode(name, v)
	if err != nil {
		return 0, err
	}
	idx := -1
	if node := e.Get("SLURMD_NODENAME"); node != "" {
		if _, list := e.first(EnvSlurmStepNodes, EnvSlurmNodeList, "SLURM_NODELIST"); list != "" {
			if hosts, err := expandHostlist(list); err == nil {
				for i, h := range hosts {
					if h == node {
						idx = i
						break
					}
				}
			}
		}
	}
	if idx < 0 {
		idx = env.NodeRank
	}
	if len(perNode) == 1 {
		idx = 0
	}
	if idx < 0 || idx >= len(perNode) {
		return 0, Errorf("%s=%q lists %d nodes but this node's index (SLURMD_NODENAME in the node list, else SLURM_NODEID) is unknown or out of range: set SLURM_NODEID", name, v, len(perNode))
	}
	return perNode[idx], nil
}

// expandTasksPerNode expands SLURM's "2(x3),1" into [2 2 2 1].
func expandTasksPerNode(name, v string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(v, ",") {
		count, reps := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			count, reps = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil || c < 1 || r < 1 || r > maxHosts || len(out)+r > maxHosts {
			return nil, Errorf("%s=%q: want a list such as 4(x2),3", name, v)
		}
		for range r {
			out = append(out, c)
		}
	}
	return out, nil
}

// slurmPort derives the store port of a SLURM job step: in [10000, 30000),
// below Linux's ephemeral range, distinct for 1250 consecutive job ids with
// up to 16 steps each.
func slurmPort(job, step uint64) int {
	return 10000 + int((job*16+step%16)%20000)
}

// maxHosts bounds a hostlist expansion: a malformed or hostile list must not
// exhaust memory.
const maxHosts = 1 << 20

// expandHostlist expands a SLURM hostlist expression such as
// "node[01-04,07],gpu-[1-2]-x[a,b]" into host names, in order, keeping
// zero padding ("node01").
func expandHostlist(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	flush := func(end int) error {
		item := strings.TrimSpace(s[start:end])
		if item == "" {
			return nil
		}
		hosts, err := expandHostItem(item, maxHosts-len(out))
		if err != nil {
			return err
		}
		out = append(out, hosts...)
		return nil
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("hostlist %q: nested '['", s)
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("hostlist %q: ']' without '['", s)
			}
		case ',':
			if depth == 0 {
				if err := flush(i); err != nil {
					return nil, err
				}
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %q: '[' without ']'", s)
	}
	if err := flush(len(s)); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostlist %q names no host", s)
	}
	return out, nil
}

// expandHostItem expands one comma-free (outside brackets) item: literal
// text and bracketed range lists, in a cartesian product.
func expandHostItem(item string, limit int) ([]string, error) {
	out := []string{""}
	for item != "" {
		i := strings.IndexByte(item, '[')
		if i < 0 {
			for k := range out {
				out[k] += item
			}
			break
		}
		j := strings.IndexByte(item, ']')
		prefix, ranges := item[:i], item[i+1:j]
		item = item[j+1:]
		alts, err := expandRanges(ranges, limit)
		if err != nil {
			return nil, err
		}
		if len(out)*len(alts) > limit {
			return nil, fmt.Errorf("hostlist expands to more than %d hosts", maxHosts)
		}
		next := make([]string, 0, len(out)*len(alts))
		for _, o := range out {
			for _, a := range alts {
				next = append(next, o+prefix+a)
			}
		}
		out = next
	}
	return out, nil
}

// expandRanges expands "01-04,07" into 01 02 03 04 07.
func expandRanges(s string, limit int) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		if !isDigits(lo) || !isDigits(hi) {
			return nil, fmt.Errorf("hostlist range %q: want numbers such as 01-04", part)
		}
		a, err1 := strconv.ParseUint(lo, 10, 64)
		b, err2 := strconv.ParseUint(hi, 10, 64)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("hostlist range %q: want low-high with low <= high", part)
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("hostlist expands to more than %d hosts", maxHosts)
		}
		width := len(lo)
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

// isDigits reports whether s is a non-empty run of decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// slurmRendezvous places the store on the first host of the SLURM node list
// with a port derived from the job and step ids. ok is false when the
// variables are not there.
func (e Reader) slurmRendezvous(env *Environment) (Rendezvous, bool, error) {
	listVar, list := e.first(EnvSlurmStepNodes, EnvSlurmNodeList, "SLURM_NODELIST")
	if env.Launcher != LauncherSlurm {
		// An MPI launcher inside an allocation: its step is the launcher's
		// daemons, its rank 0 is on the allocation's first node.
		listVar, list = e.first(EnvSlurmNodeList, "SLURM_NODELIST")
	}
	jobVar, job := e.first(EnvSlurmJobID, "SLURM_JOBID")
	if list == "" && env.Launcher != LauncherSlurm {
		return Rendezvous{}, false, nil
	}
	if list == "" {
		return Rendezvous{}, true, Errorf("SLURM step of %d tasks but neither %s nor %s is set, and %s/%s are not either: set %s and %s to rank 0's host and a free port", env.Size, EnvSlurmStepNodes, EnvSlurmNodeList, EnvMasterAddr, EnvMasterPort, EnvMasterAddr, EnvMasterPort)
	}
	if job == "" {
		return Rendezvous{}, true, Errorf("%s is set but %s is not, so no store port can be derived: set %s (or %s and %s)", listVar, EnvSlurmJobID, EnvSlurmJobID, EnvMasterAddr, EnvMasterPort)
	}
	hosts, err := expandHostlist(list)
	if err != nil {
		return Rendezvous{}, true, Errorf("%s: %v: set %s and %s instead", listVar, err, EnvMasterAddr, EnvMasterPort)
	}
	jobN, err := strconv.ParseUint(job, 10, 64)
	if err != nil {
		return Rendezvous{}, true, Errorf("%s=%q is not a job number: set %s and %s instead", jobVar, job, EnvMasterAddr, EnvMasterPort)
	}
	step, _ := strconv.ParseUint(e.slurmStep(), 10, 64)
	port := slurmPort(jobN, step)
	host := hosts[0]
	if env.Rank == 0 {
		if me := e.Get("SLURMD_NODENAME"); me != "" && me != host {
			return Rendezvous{}, true, Errorf("rank 0 runs on %s, not on %s, the first host of %s where the others will look for it: set %s to rank 0's host and %s to a free port", me, host, listVar, EnvMasterAddr, EnvMasterPort)
		}
	}
	return Rendezvous{
		Kind: RendezvousTCP,
		Addr: net.JoinHostPort(host, strconv.Itoa(port)),
		From: fmt.Sprintf("the first host of %s and a port derived from %s=%s", listVar, jobVar, job),
	}, true, nil
}
