package env

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RendezvousKind says how the ranks of a world meet.
type RendezvousKind int

// Kinds of meeting place.
const (
	// RendezvousNone: no store (a world of one, or comm.Options.Store).
	RendezvousNone RendezvousKind = iota
	// RendezvousTCP: rank 0 hosts a TCP store at Addr, the others dial it.
	RendezvousTCP
	// RendezvousAgent: a launcher (torchrun's agent) already hosts a
	// PyTorch TCPStore at Addr; every rank, rank 0 included, is a client.
	RendezvousAgent
	// RendezvousFile: a file store at Path, on a file system every rank
	// sees.
	RendezvousFile
	// RendezvousMPI: under an MPI launcher on several hosts, in a build
	// with -tags mpi, rank 0 picks a free port and MPI broadcasts its
	// address (the mpi driver's backend.Bootstrapper); rank 0 then hosts
	// a TCP store there. Read chooses it only when Reader.MPIBootstrap
	// is set.
	RendezvousMPI
	// RendezvousEtcd: an etcd cluster at Endpoints keeps the store, under
	// Prefix; every rank is a client and none hosts it, so the loss of
	// any rank, rank 0 included, leaves it standing.
	RendezvousEtcd
)

// String names the kind as messages and logs show it.
func (k RendezvousKind) String() string {
	switch k {
	case RendezvousNone:
		return "none"
	case RendezvousTCP:
		return "tcp"
	case RendezvousAgent:
		return "agent-tcp"
	case RendezvousFile:
		return "file"
	case RendezvousMPI:
		return "mpi-bootstrap"
	case RendezvousEtcd:
		return "etcd"
	}
	return "RendezvousKind(" + strconv.Itoa(int(k)) + ")"
}

// Rendezvous is where the ranks of a world meet.
type Rendezvous struct {
	Kind RendezvousKind
	// Addr is the store's "host:port" (TCP kinds), or the etcd endpoints
	// joined by commas (RendezvousEtcd).
	Addr string
	// Endpoints are the etcd servers' "host:port" (RendezvousEtcd).
	Endpoints []string
	// LeaseTTL is the etcd store's lease TTL (RendezvousEtcd; 0 for the
	// store's default).
	LeaseTTL time.Duration
	// Path is the store file (RendezvousFile). comm.Init removes it when
	// the last rank closes its world.
	Path string
	// Prefix namespaces this job's keys in a shared store ("" for none):
	// under torchrun's agent store, one per restart attempt; in etcd, the
	// key prefix the user gave, which names the job.
	Prefix string
	// From names the variables that chose this place, for messages.
	From string
}

// HostAddr is the address rank 0 listens on to host a TCP store at Addr:
// every interface on Addr's port, unless Addr's host is a loopback
// address (a host name may resolve to 127.0.1.1, as on Debian, on its own
// host while the others reach it at another address).
func (r Rendezvous) HostAddr() string {
	host, port, err := net.SplitHostPort(r.Addr)
	if err != nil || isLoopback(host) {
		return r.Addr
	}
	return net.JoinHostPort("", port)
}

// rendezvous chooses the meeting place of a world of several ranks from the
// launcher's variables (GOCOMM_INIT_METHOD and comm.Options come later, in
// comm.Init).
func (e Reader) rendezvous(env *Environment) (Rendezvous, error) {
	if init := e.Get(EnvInitMethod); init != "" && init != "env://" {
		return ParseInitMethod(init)
	}
	addr, port := e.Get(EnvMasterAddr), e.Get(EnvMasterPort)
	if addr != "" || port != "" {
		hp, err := MasterHostPort(addr, port)
		if err != nil {
			return Rendezvous{}, err
		}
		r := Rendezvous{Kind: RendezvousTCP, Addr: hp, From: EnvMasterAddr + ":" + EnvMasterPort}
		if env.Launcher == LauncherTorch && strings.EqualFold(e.Get(EnvUseAgentStore), "true") {
			attempt := e.Get(EnvRestartCount)
			if attempt == "" {
				attempt = "0"
			}
			run := e.Get(EnvRunID)
			if run == "" {
				run = "none"
			}
			r.Kind = RendezvousAgent
			r.Prefix = "gocomm/torchelastic/" + run + "/attempt_" + attempt
			r.From = "torchrun's agent store at " + EnvMasterAddr + ":" + EnvMasterPort + " (" + EnvUseAgentStore + "=True)"
		}
		return r, nil
	}
	if env.Launcher == LauncherTorch {
		return Rendezvous{}, Errorf("world of %d ranks (%s=%d) but %s and %s are not set: set them to rank 0's host and a free port on it (torchrun and commrun set both)", env.Size, EnvWorldSize, env.Size, EnvMasterAddr, EnvMasterPort)
	}
	if env.LocalSize == env.Size && env.Launcher != LauncherSlurm {
		id, from := e.jobID(env.Launcher)
		name := "gocomm-" + env.Launcher.String() + "-" + sanitize(id) + ".store"
		return Rendezvous{Kind: RendezvousFile, Path: filepath.Join(os.TempDir(), name), From: "a file store in " + os.TempDir() + " named by " + from + " (every rank on one host)"}, nil
	}
	if r, ok, err := e.slurmRendezvous(env); ok || err != nil {
		return r, err
	}
	if (env.Launcher == LauncherOpenMPI || env.Launcher == LauncherPMI) && e.MPIBootstrap {
		return Rendezvous{Kind: RendezvousMPI, From: "MPI: rank 0's address broadcast over MPI_COMM_WORLD (a -tags mpi build)"}, nil
	}
	init := EnvInitMethod + "=file:///shared/dir/job-<id>.store"
	hint := "mpirun -x MASTER_ADDR=<rank 0's host> -x MASTER_PORT=29500"
	if env.Launcher == LauncherPMI {
		hint = "mpiexec -genv MASTER_ADDR <rank 0's host> -genv MASTER_PORT 29500"
	}
	return Rendezvous{}, Errorf("world of %d ranks on several hosts started by %s, but no meeting place: set %s and %s (%s), or %s on a shared file system, or build with -tags mpi to meet through MPI", env.Size, env.Launcher, EnvMasterAddr, EnvMasterPort, hint, init)
}

// MasterHostPort validates the values of MASTER_ADDR and MASTER_PORT and
// joins them into "host:port"; a missing half or a port outside 1-65535 is
// an error wrapping ErrEnvironment that says what to set.
func MasterHostPort(addr, port string) (string, error) {
	switch {
	case addr == "":
		return "", Errorf("%s=%s is set but %s is not: set it to the host of rank 0 (127.0.0.1 on one machine)", EnvMasterPort, port, EnvMasterAddr)
	case port == "":
		return "", Errorf("%s=%s is set but %s is not: set it to a free TCP port on rank 0's host (e.g. 29500)", EnvMasterAddr, addr, EnvMasterPort)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", Errorf("%s=%q is not a TCP port: set it to a free port (1-65535) rank 0 can listen on", EnvMasterPort, port)
	}
	return net.JoinHostPort(addr, strconv.Itoa(p)), nil
}

// jobID names an MPI job for its file store: the launcher's job id, else
// the ranks' common parent process (the launcher's proxy on this host).
func (e Reader) jobID(l Launcher) (id, from string) {
	if l == LauncherOpenMPI {
		if name, v := e.first("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid"); v != "" {
			return v, name
		}
	}
	if name, v := e.first("PMIX_NAMESPACE", "PMI_JOBID", EnvSlurmJobID); v != "" {
		if name == EnvSlurmJobID {
			v += "." + e.slurmStep()
		}
		return v, name
	}
	return parentID(), "the parent process (the launcher) id"
}

// parentID identifies the parent process: its pid and, where /proc has it,
// its start time, so that a recycled pid does not name an old job.
func parentID() string {
	ppid := os.Getppid()
	id := strconv.Itoa(ppid)
	if b, err := os.ReadFile("/proc/" + id + "/stat"); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 19 {
				id += "-" + f[19] // starttime, field 22 of proc(5)
			}
		}
	}
	return "ppid" + id
}

// sanitize keeps a job id usable in a file name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

// ParseInitMethod reads the value of GOCOMM_INIT_METHOD: tcp://host:port
// (rank 0 hosts a TCP store there), file:///path (a file store), as
// torch's init_method URLs, or etcd://host:port[,host:port...]/prefix
// (an etcd cluster keeps the store under prefix, which must name the job:
// two jobs given one prefix read each other's keys), with an optional
// ?ttl=duration for the etcd store's leases (whole seconds, 1s to 24h).
// Anything else (env:// included: the caller handles it) is an error
// wrapping ErrEnvironment that lists the forms.
func ParseInitMethod(s string) (Rendezvous, error) {
	if strings.HasPrefix(s, "etcd:") {
		return parseEtcd(s)
	}
	u, err := url.Parse(s)
	if err == nil {
		switch u.Scheme {
		case "tcp":
			if u.Hostname() != "" && u.Port() != "" {
				if _, err := MasterHostPort(u.Hostname(), u.Port()); err == nil {
					return Rendezvous{Kind: RendezvousTCP, Addr: u.Host, From: EnvInitMethod}, nil
				}
			}
		case "file":
			if u.Path != "" && u.Host == "" {
				return Rendezvous{Kind: RendezvousFile, Path: u.Path, From: EnvInitMethod}, nil
			}
		}
	}
	return Rendezvous{}, Errorf("%s=%q: want env://, tcp://host:port (rank 0 hosts the store), file:///absolute/path (a file every rank can reach) or etcd://host:port[,host:port...]/job-prefix (an etcd cluster keeps the store)", EnvInitMethod, s)
}

// parseEtcd checks an etcd:// init method, piece by piece, so that the
// error says which piece is wrong. The host part is split by hand: a list
// of endpoints is no URL host.
func parseEtcd(s string) (Rendezvous, error) {
	bad := func(why string) (Rendezvous, error) {
		return Rendezvous{}, Errorf("%s=%q: %s (want etcd://host:port[,host:port...]/job-prefix[?ttl=10s])", EnvInitMethod, s, why)
	}
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return bad("no etcd endpoint")
	}
	hosts, tail, _ := strings.Cut(rest, "/")
	switch {
	case strings.Contains(hosts, "@"):
		return bad("user names and passwords are not supported")
	case strings.ContainsAny(hosts, "?#"):
		return bad("no key prefix: give each job its own, such as /gocomm/job-42")
	case hosts == "":
		return bad("no etcd endpoint")
	}
	u, err := url.Parse("/" + tail)
	if err != nil {
		return bad("unreadable prefix or query: " + err.Error())
	}
	if u.Fragment != "" || strings.Contains(tail, "#") {
		return bad("unexpected #fragment")
	}
	r := Rendezvous{Kind: RendezvousEtcd, From: EnvInitMethod}
	for _, hp := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return bad("endpoint " + strconv.Quote(hp) + " is not host:port")
		}
		ep, err := MasterHostPort(host, port)
		if err != nil {
			return bad("endpoint " + strconv.Quote(hp) + " has no TCP port (1-65535)")
		}
		r.Endpoints = append(r.Endpoints, ep)
	}
	r.Addr = strings.Join(r.Endpoints, ",")
	r.Prefix = strings.TrimRight(u.Path, "/")
	if r.Prefix == "" {
		return bad("no key prefix: give each job its own, such as /gocomm/job-42")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("unreadable query: " + err.Error())
	}
	for k, vs := range q {
		if k != "ttl" || len(vs) != 1 {
			return bad("unknown or repeated parameter " + strconv.Quote(k) + " (only ttl= is known)")
		}
		d, err := time.ParseDuration(vs[0])
		if err != nil || d < time.Second || d > 24*time.Hour {
			return bad("ttl=" + strconv.Quote(vs[0]) + " is not a duration from 1s to 24h")
		}
		r.LeaseTTL = d
	}
	return r, nil
}

// JobIdentity returns the identity the launcher gave this job, alike on
// every rank of it and different for another job, and the variable it came
// from: torchrun's and commrun's TORCHELASTIC_RUN_ID (unless "none",
// torchrun's default), the MPI job's PMIx namespace or PMI job id, or
// SLURM's job and step. It is "" when the launcher gave none, as for ranks
// started by hand: comm.Init then tells two jobs sharing one meeting place
// apart only by their world sizes and by two processes claiming one rank.
func (e Reader) JobIdentity() (id, from string) {
	if v := e.Get(EnvRunID); v != "" && v != "none" {
		return v, EnvRunID
	}
	if name, v := e.first("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_JOBID", EnvSlurmJobID); v != "" {
		if name == EnvSlurmJobID {
			v += "." + e.slurmStep()
		}
		return v, name
	}
	return "", ""
}
