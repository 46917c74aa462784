//go:build linux

package cpubind

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Allowed returns the CPUs the calling thread may run on (the process's,
// unless a thread was bound on its own), sorted.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	return members(&set), nil
}

// HostCPUs returns how many CPUs the ranks of this host share: those of
// the process's cpuset cgroup (a container's), else those online, and
// never fewer than the process may run on. A launcher that binds each
// rank to CPUs of its own (mpirun binds 2 ranks to a core each, srun
// --cpu-bind) narrows each process's affinity, which runtime.NumCPU
// reports, not the host's: 2 ranks so bound on 2 CPUs do not outnumber
// them.
func HostCPUs() int {
	return max(runtime.NumCPU(), len(hostCPUList()))
}

// hostCPUList lists the CPUs the ranks of this host share, from the first
// of cpusetFiles that reads; nil when none does.
func hostCPUList() []int {
	for _, f := range cpusetFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if cpus, err := ParseList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return cpus
		}
	}
	return nil
}

// cpusetFiles lists where the process's CPUs may be read, best first: its
// cgroup's effective cpuset (cgroup v2, then v1), then the CPUs online.
func cpusetFiles() []string {
	var files []string
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				files = append(files, path.Join("/sys/fs/cgroup", parts[2], "cpuset.cpus.effective"))
			case strings.Contains(","+parts[1]+",", ",cpuset,"):
				files = append(files, path.Join("/sys/fs/cgroup/cpuset", parts[2], "cpuset.effective_cpus"))
			}
		}
	}
	return append(files, "/sys/devices/system/cpu/online")
}

// cpuSet is the CPU set of cpus.
func cpuSet(cpus []int) unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return set
}

func members(set *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c <= maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// Apply binds every thread of the process to cpus. Threads the process
// starts afterwards inherit the binding from the thread that starts them.
// It passes over the threads until a pass finds none it had not bound (a
// thread started during a pass may have copied the old CPUs).
func Apply(cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("%w: no CPUs to bind to", ErrBind)
	}
	set := cpuSet(cpus)
	bound := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		tids, err := threads()
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if bound[tid] {
				continue
			}
			fresh++
			switch err := unix.SchedSetaffinity(tid, &set); {
			case err == nil:
				bound[tid] = true
			case errors.Is(err, unix.ESRCH): // the thread has exited
			case errors.Is(err, unix.EINVAL):
				return fmt.Errorf("%w: none of CPUs %s is available to this process (it may run on %s)", ErrBind, Format(cpus), allowedString())
			default:
				return fmt.Errorf("%w: binding thread %d to CPUs %s: %v", ErrBind, tid, Format(cpus), err)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return nil
}

func allowedString() string {
	cpus, err := Allowed()
	if err != nil {
		return "unknown CPUs"
	}
	return Format(cpus)
}

// threads lists the process's thread ids.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("%w: listing the process's threads: %v", ErrBind, err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// ThreadCPUs returns, for every thread of the process, the CPUs it may
// run on (for tests and diagnostics).
func ThreadCPUs() (map[int][]int, error) {
	tids, err := threads()
	if err != nil {
		return nil, err
	}
	out := make(map[int][]int, len(tids))
	for _, tid := range tids {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			return nil, err
		}
		out[tid] = members(&set)
	}
	return out, nil
}

// ApplyThread binds the calling thread only (lock it first with
// runtime.LockOSThread): processes it starts inherit its CPUs.
func ApplyThread(cpus []int) error {
	set := cpuSet(cpus)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("%w: binding this thread to CPUs %s: %v", ErrBind, Format(cpus), err)
	}
	return nil
}

// OneLastLevelCache reports whether every CPU the ranks of this host
// share (as HostCPUs counts them) shares one last-level cache, as
// sysfs describes the caches (false when it does not say).
func OneLastLevelCache() bool {
	cpus := hostCPUList()
	return len(cpus) > 0 && shareLastLevelCache("/sys/devices/system/cpu", cpus)
}

// shareLastLevelCache reports whether cpus all share the last-level
// cache of cpus[0], read under root (/sys/devices/system/cpu): the
// cache of the highest level among cpu<N>/cache/index*, whose
// shared_cpu_list must hold every one of cpus.
func shareLastLevelCache(root string, cpus []int) bool {
	dirs, _ := filepath.Glob(filepath.Join(root, "cpu"+strconv.Itoa(cpus[0]), "cache", "index*"))
	level, shared := 0, ""
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "level"))
		if err != nil {
			continue
		}
		l, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || l <= level {
			continue
		}
		if s, err := os.ReadFile(filepath.Join(d, "shared_cpu_list")); err == nil {
			level, shared = l, strings.TrimSpace(string(s))
		}
	}
	in, err := ParseList(shared)
	if level == 0 || err != nil {
		return false
	}
	for _, c := range cpus {
		if !slices.Contains(in, c) {
			return false
		}
	}
	return true
}
