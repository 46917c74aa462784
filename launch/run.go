package launch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm/env"
)

// Defaults of Config.
const (
	DefaultKillGrace  = 5 * time.Second
	DefaultTailLines  = 10
	DefaultMasterPort = 29500 // on several nodes, as torchrun
)

// ErrConfig is wrapped by the errors Run returns for a Config it cannot
// run (before starting anything).
var ErrConfig = errors.New("launch: invalid configuration")

// Config describes this host's share of a job.
type Config struct {
	// NProcs is the number of ranks to start on this host (commrun -n).
	NProcs int
	// NNodes is the number of hosts of the job (0 means 1); NodeRank is
	// this host's index. Every host runs NProcs ranks, unless
	// NProcsPerNode says otherwise.
	NNodes, NodeRank int
	// NProcsPerNode, when set, is the number of ranks of every host of the
	// job in node-rank order (commrun -n 2,1,2), for hosts that run
	// different numbers of ranks: this host runs NProcsPerNode[NodeRank],
	// its ranks follow those of the hosts before it, and NNodes is its
	// length. Every host must be given the same list.
	NProcsPerNode []int
	// MasterAddr and MasterPort locate rank 0's store. On one host they
	// default to 127.0.0.1 and a free port; on several, MasterAddr is
	// required and MasterPort defaults to DefaultMasterPort.
	MasterAddr string
	MasterPort int
	// Timeout bounds the whole job (0: none). When it expires every rank
	// is stopped and Run returns a *JobError with TimedOut set.
	Timeout time.Duration
	// KillGrace is how long a rank has to exit after SIGTERM (or a
	// forwarded signal) before it gets SIGKILL; 0 is DefaultKillGrace.
	KillGrace time.Duration
	// Program and Args are the command every rank runs.
	Program string
	Args    []string
	// Env is the environment the ranks start from (nil: os.Environ()); Run
	// replaces the contract's variables in it.
	Env []string
	// Dir is the ranks' working directory ("": the caller's).
	Dir string
	// Stdout and Stderr receive the ranks' output, each line prefixed
	// with "[rank] " (nil: os.Stdout, os.Stderr). Lines are written whole,
	// one at a time, so they may be shared with other writers.
	Stdout, Stderr io.Writer
	// Signals, if not nil, are forwarded to every rank as they arrive
	// (commrun passes SIGINT and SIGTERM). After the first one, ranks
	// still running after KillGrace are killed.
	Signals <-chan os.Signal
	// TailLines is how many of a rank's last lines a failure report
	// shows (0: DefaultTailLines; negative: none).
	TailLines int
	// Name prefixes the launcher's own messages (default "commrun").
	Name string
	// Elastic, when set, keeps the job going through rank failures
	// (commrun --elastic MIN:MAX, --max-restarts): a failed rank's process
	// is started again, up to MaxRestarts times for the host, with
	// GOCOMM_JOIN=1, so that comm.Init makes it join the running world
	// when the survivors call Comm.Grow (after Comm.Shrink); once no
	// restart is left, the job runs on while at least Min of this host's
	// ranks remain, and fails when fewer do.
	Elastic *Elastic
	// KeepGoing lets the other ranks run on when one fails (commrun
	// -keep-going), for programs whose survivors recover (Comm.Shrink):
	// Run waits for every rank and still returns a *JobError naming the
	// first failure. Timeouts, signals and ctx stop the ranks as always.
	KeepGoing bool
	// Bind is the GOCOMM_BIND the ranks get (commrun -bind-to): "" keeps
	// the environment's and sets auto where it has none (each local rank
	// bound to its own share of the CPUs, as mpirun does; see
	// env.EnvBind), none leaves the ranks unbound, or a CPU list.
	Bind string
}

// withDefaults validates cfg and fills in its defaults. It may pick a
// free port.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return cfg, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if n := len(cfg.NProcsPerNode); n > 0 {
		if cfg.NNodes > 1 && cfg.NNodes != n {
			return bad("-n lists the ranks of %d hosts but --nnodes is %d: give one count per host", n, cfg.NNodes)
		}
		cfg.NNodes = n
		for i, k := range cfg.NProcsPerNode {
			if k < 1 {
				return bad("-n %s: host %d has %d ranks, want at least 1", joinInts(cfg.NProcsPerNode), i, k)
			}
		}
		if cfg.NodeRank >= 0 && cfg.NodeRank < n {
			cfg.NProcs = cfg.NProcsPerNode[cfg.NodeRank]
		}
	}
	if cfg.NNodes == 0 {
		cfg.NNodes = 1
	}
	switch {
	case cfg.NProcs < 1:
		return bad("%d ranks per node (-n): want at least 1", cfg.NProcs)
	case cfg.NNodes < 1:
		return bad("%d nodes (--nnodes): want at least 1", cfg.NNodes)
	case cfg.NodeRank < 0 || cfg.NodeRank >= cfg.NNodes:
		return bad("node rank %d (--node-rank) out of range for %d nodes: want 0..%d", cfg.NodeRank, cfg.NNodes, cfg.NNodes-1)
	case cfg.Program == "":
		return bad("no program to run: give it after the flags, e.g. commrun -n 4 -- ./train")
	case cfg.Elastic != nil && (cfg.Elastic.Min < 1 || cfg.Elastic.Min > cfg.NProcs || cfg.NProcs > cfg.Elastic.Max):
		return bad("--elastic %d:%d with %d ranks on this host: want 1 <= MIN <= ranks <= MAX", cfg.Elastic.Min, cfg.Elastic.Max, cfg.NProcs)
	case cfg.Elastic != nil && cfg.Elastic.MaxRestarts < 0:
		return bad("--max-restarts %d: want >= 0", cfg.Elastic.MaxRestarts)
	case cfg.MasterPort < 0 || cfg.MasterPort > 65535:
		return bad("master port %d (--master-port) is not a TCP port", cfg.MasterPort)
	case cfg.MasterAddr == "" && cfg.NNodes > 1:
		return bad("--master-addr is required with --nnodes %d: the host of node rank 0, which every node can reach", cfg.NNodes)
	case cfg.Timeout < 0:
		return bad("timeout %v: want a positive duration or 0 for none", cfg.Timeout)
	}
	if cfg.MasterAddr == "" {
		cfg.MasterAddr = "127.0.0.1"
	}
	if cfg.MasterPort == 0 {
		if cfg.NNodes > 1 {
			cfg.MasterPort = DefaultMasterPort
		} else {
			p, err := freePort(cfg.MasterAddr)
			if err != nil {
				return bad("no free port for the store on %s (set --master-port): %v", cfg.MasterAddr, err)
			}
			cfg.MasterPort = p
		}
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.TailLines == 0 {
		cfg.TailLines = DefaultTailLines
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Name == "" {
		cfg.Name = "commrun"
	}
	return cfg, nil
}

// freePort asks the kernel for a port that is free on host now. Rank 0
// binds it moments later; the window is short.
func freePort(host string) (int, error) {
	bind := host
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		bind = "" // rank 0 listens on every interface
	}
	l, err := net.Listen("tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// rankEnv is the environment of local rank l of this node.
func (cfg *Config) rankEnv(l int) []string {
	// The torchrun family's variables are replaced: the stale ones of an
	// enclosing launcher would otherwise be misread.
	stale := env.TorchVars()
	drop := make(map[string]bool, len(stale))
	for _, v := range stale {
		drop[v] = true
	}
	// GOCOMM_BIND: Config.Bind, else the environment's, else auto.
	bind := cmp.Or(cfg.Bind, envLookup(cfg.Env)(env.EnvBind), "auto")
	drop[env.EnvBind] = true
	vars := make([]string, 0, len(cfg.Env)+9)
	for _, kv := range cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			vars = append(vars, kv)
		}
	}
	vars = append(vars, env.EnvBind+"="+bind)
	itoa := strconv.Itoa
	// The job's identity, as torchrun's run id: comm.Init's join check
	// tells two jobs sharing one MASTER_ADDR:MASTER_PORT apart by it. The
	// caller's TORCHELASTIC_RUN_ID, else, on one host, this launcher's.
	if run := envLookup(cfg.Env)(env.EnvRunID); run != "" {
		vars = append(vars, env.EnvRunID+"="+run)
	} else if cfg.NNodes <= 1 {
		vars = append(vars, env.EnvRunID+"=commrun-"+itoa(os.Getpid())+"-"+itoa(cfg.MasterPort))
	}
	first, world := cfg.firstRank(), cfg.worldSize()
	return append(vars,
		env.EnvRank+"="+itoa(first+l),
		env.EnvWorldSize+"="+itoa(world),
		env.EnvLocalRank+"="+itoa(l),
		env.EnvLocalWorldSize+"="+itoa(cfg.NProcs),
		env.EnvGroupRank+"="+itoa(cfg.NodeRank),
		env.EnvGroupWorldSize+"="+itoa(cfg.NNodes),
		env.EnvMasterAddr+"="+cfg.MasterAddr,
		env.EnvMasterPort+"="+itoa(cfg.MasterPort),
	)
}

// firstRank is the global rank of this host's local rank 0.
func (cfg *Config) firstRank() int {
	if len(cfg.NProcsPerNode) == 0 {
		return cfg.NodeRank * cfg.NProcs
	}
	first := 0
	for _, k := range cfg.NProcsPerNode[:cfg.NodeRank] {
		first += k
	}
	return first
}

// worldSize is the number of ranks on all hosts.
func (cfg *Config) worldSize() int {
	if len(cfg.NProcsPerNode) == 0 {
		return cfg.NNodes * cfg.NProcs
	}
	world := 0
	for _, k := range cfg.NProcsPerNode {
		world += k
	}
	return world
}

// RankExit is how one rank ended.
type RankExit struct {
	Rank int // global rank
	PID  int // 0 if it never started
	// Code is the exit status, -1 when a signal ended the rank or it never
	// started.
	Code int
	// Signal is the signal that ended the rank, or nil.
	Signal os.Signal
	// Err is why the rank could not be started or waited for.
	Err error
	// Stopped is set when a signal from the launcher ended the rank (after
	// another rank failed, a timeout, or a forwarded signal).
	Stopped bool
	// Elapsed is the time from the job's start to the rank's end.
	Elapsed time.Duration
	// Tail holds the rank's last lines of output (stdout and stderr).
	Tail []string
}

// Failed reports whether the rank did not exit with status 0.
func (r *RankExit) Failed() bool { return r.Code != 0 || r.Err != nil || r.Signal != nil }

// Status says how the rank ended: "exit status 3", "killed by signal 9
// (killed)", "not started: ...".
func (r *RankExit) Status() string {
	switch {
	case r.Err != nil && r.PID == 0:
		return "not started: " + r.Err.Error()
	case r.Signal != nil:
		if n := signalNumber(r.Signal); n > 0 {
			return fmt.Sprintf("killed by signal %d (%v)", n, r.Signal)
		}
		return fmt.Sprintf("killed by %v", r.Signal)
	case r.Err != nil:
		return r.Err.Error()
	}
	return "exit status " + strconv.Itoa(r.Code)
}

// Elastic is an elastic job's bounds (see Config.Elastic).
type Elastic struct {
	// Min is the fewest of this host's ranks the job runs on; Max the most
	// (NProcs must not exceed it).
	Min, Max int
	// MaxRestarts bounds how many failed processes this host restarts.
	MaxRestarts int
}

// JobError is the error of a job that did not end with every rank exiting
// 0. Exactly one cause is set: First, TimedOut, Signal or Canceled.
type JobError struct {
	// Name is the launcher's name, for the message.
	Name string
	// First is the first rank to fail; the launcher then stopped the
	// others.
	First *RankExit
	// TimedOut is set when Config.Timeout (Timeout) expired first.
	TimedOut bool
	Timeout  time.Duration
	// Signal is the signal the launcher received and forwarded.
	Signal os.Signal
	// Canceled is the context's error when it ended the job.
	Canceled error
	// Ranks holds every rank of this host, in rank order.
	Ranks []RankExit
	// KeptGoing: after First failed, the others were left to run on
	// (Config.KeepGoing).
	KeptGoing bool
}

// Error is the failure summary: the cause, the failed rank's last lines of
// output, and how every other rank ended.
func (e *JobError) Error() string {
	var b strings.Builder
	switch {
	case e.First != nil:
		f := e.First
		fmt.Fprintf(&b, "%s: rank %d failed first, %v after the start: %s", e.Name, f.Rank, f.Elapsed.Round(time.Millisecond), f.Status())
		if f.PID != 0 {
			fmt.Fprintf(&b, " (pid %d)", f.PID)
		}
		writeTail(&b, e.Name, f)
		if e.KeptGoing {
			fmt.Fprintf(&b, "\n%s: the other ranks were left to run on (-keep-going)", e.Name)
		}
	case e.TimedOut:
		fmt.Fprintf(&b, "%s: the job timed out after %v; every rank still running was stopped", e.Name, e.Timeout)
	case e.Signal != nil:
		fmt.Fprintf(&b, "%s: interrupted by %v, which was forwarded to every rank", e.Name, e.Signal)
	default:
		fmt.Fprintf(&b, "%s: canceled (%v); every rank still running was stopped", e.Name, e.Canceled)
	}
	for i := range e.Ranks {
		r := &e.Ranks[i]
		if e.First != nil && r.Rank == e.First.Rank {
			continue
		}
		fmt.Fprintf(&b, "\n%s: rank %d: %s", e.Name, r.Rank, r.Status())
		if r.Stopped {
			b.WriteString(" (stopped by " + e.Name + ")")
		}
		if e.First == nil && r.Stopped && len(r.Tail) > 0 {
			// Where a hung or interrupted rank was.
			fmt.Fprintf(&b, "; last line: %s", r.Tail[len(r.Tail)-1])
		}
	}
	return b.String()
}

func writeTail(b *strings.Builder, name string, r *RankExit) {
	if len(r.Tail) == 0 {
		fmt.Fprintf(b, "\n%s: rank %d printed nothing", name, r.Rank)
		return
	}
	if len(r.Tail) == 1 {
		fmt.Fprintf(b, "\n%s: last line of rank %d:", name, r.Rank)
	} else {
		fmt.Fprintf(b, "\n%s: last %d lines of rank %d:", name, len(r.Tail), r.Rank)
	}
	for _, l := range r.Tail {
		fmt.Fprintf(b, "\n    [%d] %s", r.Rank, l)
	}
}

// ExitCode is the status a launcher should exit with: the first failed
// rank's exit status (128+n for signal n), 124 for a timeout, 128+n for a
// forwarded signal n, 1 otherwise.
func (e *JobError) ExitCode() int {
	switch {
	case e.First != nil:
		if e.First.Code > 0 {
			return e.First.Code
		}
		if n := signalNumber(e.First.Signal); n > 0 {
			return 128 + n
		}
	case e.TimedOut:
		return 124
	case e.Signal != nil:
		if n := signalNumber(e.Signal); n > 0 {
			return 128 + n
		}
	}
	return 1
}

// rankProc is one running rank.
type rankProc struct {
	local    int // local rank (the slot a restart reuses)
	exit     RankExit
	cmd      *exec.Cmd
	tail     *tail
	running  bool // started and not yet reaped (supervisor only)
	signaled bool // the launcher signalled it (supervisor only)
}

// Run starts NProcs ranks of cfg.Program with the environment contract and
// waits until every one has exited. It returns nil when all exited with
// status 0, a *JobError otherwise (after stopping the others as soon as
// one failed), or an error wrapping ErrConfig for an unusable cfg. When
// ctx ends, the ranks are stopped as for a timeout.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	outMu := new(sync.Mutex) // one whole line at a time, across both streams
	stdout := &syncWriter{mu: outMu, w: cfg.Stdout}
	stderr := &syncWriter{mu: outMu, w: cfg.Stderr}

	start := time.Now()
	procs := make([]*rankProc, cfg.NProcs)
	exits := make(chan *rankProc, cfg.NProcs)
	var wg sync.WaitGroup
	defer wg.Wait()
	// launch starts local rank l (again, as a newcomer, when extra says
	// so) and reports its exit on exits.
	launch := func(l int, extra ...string) *rankProc {
		rank := cfg.firstRank() + l
		p := &rankProc{local: l, exit: RankExit{Rank: rank, Code: -1}, tail: &tail{n: max(cfg.TailLines, 0)}}
		outW := newLineWriter(rank, stdout, p.tail)
		errW := newLineWriter(rank, stderr, p.tail)
		cmd := exec.Command(cfg.Program, cfg.Args...)
		cmd.Env = append(cfg.rankEnv(l), extra...)
		cmd.Dir = cfg.Dir
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.WaitDelay = cfg.KillGrace
		setProcessGroup(cmd)
		p.cmd = cmd
		if err := cmd.Start(); err != nil {
			p.exit.Err = err
			exits <- p
			return p
		}
		p.running = true
		p.exit.PID = cmd.Process.Pid
		wg.Go(func() {
			err := cmd.Wait()
			outW.flush()
			errW.flush()
			p.exit.Elapsed = time.Since(start)
			p.exit.Tail = p.tail.get()
			st := cmd.ProcessState
			switch {
			case st == nil:
				p.exit.Err = err
			default:
				p.exit.Code = st.ExitCode()
				if sig, ok := exitSignal(st); ok {
					p.exit.Signal = sig
				}
				var exitErr *exec.ExitError
				if err != nil && !errors.As(err, &exitErr) {
					p.exit.Err = err // such as exec.ErrWaitDelay
				}
			}
			exits <- p
		})
		return p
	}
	for l := range procs {
		procs[l] = launch(l)
	}

	je := &JobError{Name: cfg.Name}
	var (
		stopping  bool
		killTimer <-chan time.Time
		timeout   <-chan time.Time
	)
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	signalAll := func(sig os.Signal) {
		for _, p := range procs {
			if p.running {
				p.signaled = true
				signalGroup(p.cmd.Process, sig)
			}
		}
	}
	stop := func(sig os.Signal) {
		signalAll(sig)
		if !stopping {
			stopping = true
			killTimer = time.After(cfg.KillGrace)
		}
	}
	done := ctx.Done()
	restarts, lost := 0, 0
	var forgiven []RankExit // failed processes elastic mode restarted or ran on without
	for left := cfg.NProcs; left > 0; {
		select {
		case p := <-exits:
			left--
			p.running = false
			p.exit.Stopped = p.signaled && p.exit.Signal != nil
			if !p.exit.Failed() || stopping || je.First != nil {
				break
			}
			if el := cfg.Elastic; el != nil {
				if restarts < el.MaxRestarts {
					// The replacement joins the running world
					// (comm.Init under GOCOMM_JOIN=1 is comm.Join).
					restarts++
					forgiven = append(forgiven, p.exit)
					stderr.writeLine(fmt.Appendf(nil, "%s: rank %d failed (%s); restarting it (%d of %d restarts); it joins the running world\n", cfg.Name, p.exit.Rank, p.exit.Status(), restarts, el.MaxRestarts))
					procs[p.local] = launch(p.local, env.EnvJoin+"=1", env.EnvRestartCount+"="+strconv.Itoa(restarts))
					left++
					break
				}
				lost++
				if cfg.NProcs-lost >= el.Min {
					stderr.writeLine(fmt.Appendf(nil, "%s: rank %d failed (%s) and no restart is left; %d ranks run on (at least %d needed)\n", cfg.Name, p.exit.Rank, p.exit.Status(), cfg.NProcs-lost, el.Min))
					forgiven = append(forgiven, p.exit)
					break
				}
			}
			je.First = &p.exit
			if cfg.KeepGoing {
				je.KeptGoing = true
			} else {
				stop(terminate)
			}
		case sig := <-cfg.Signals:
			if je.Signal == nil && !stopping && je.First == nil {
				je.Signal = sig
			}
			stop(sig)
		case <-timeout:
			if !stopping && je.First == nil {
				je.TimedOut, je.Timeout = true, cfg.Timeout
			}
			stop(terminate)
		case <-done:
			done = nil
			if !stopping && je.First == nil {
				je.Canceled = ctx.Err()
			}
			stop(terminate)
		case <-killTimer:
			killTimer = nil
			signalAll(os.Kill)
		}
	}
	wg.Wait()
	failed := false
	for _, p := range procs {
		je.Ranks = append(je.Ranks, p.exit)
		// A rank elastic mode gave up on (no restart left, enough
		// ranks running on) does not fail the job.
		failed = failed || p.exit.Failed() && !slices.ContainsFunc(forgiven, func(r RankExit) bool { return r.PID == p.exit.PID })
	}
	if je.First != nil {
		je.First = &je.Ranks[je.First.Rank-cfg.firstRank()]
	}
	if !stopping && !failed {
		return nil
	}
	return je
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
