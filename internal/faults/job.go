package faults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how to run a job of ranks on this host.
type Options struct {
	// Ranks is the world size (default 4).
	Ranks int
	// Transport is GOCOMM_TRANSPORT for the ranks: "shm", "tcp" or ""
	// (auto).
	Transport string
	// Command returns a new process for rank of a binary that calls Rank
	// when RoleEnv is set (Start sets its Env and output; ctx kills it).
	Command func(ctx context.Context, rank int) *exec.Cmd
	// Env is the ranks' base environment; nil is this process's, without
	// launcher variables (RANK, MASTER_ADDR, ...) or GOCOMM_* knobs.
	Env []string
	// RankEnv, if set, returns variables for one rank, added last (they
	// override the defaults: e.g. LOCAL_RANK and MASTER_ADDR for ranks on
	// several simulated hosts).
	RankEnv func(rank int) []string
	// Wait bounds a job from start to the last rank's exit (default 1m):
	// a rank still running then is counted hung and killed.
	Wait time.Duration
}

// Failure is what a rank's fail line says.
type Failure struct {
	Origin, Reporter int
	Kind             string
	Took             time.Duration // from the failing operation's start
	Text             string
	At               time.Time // when the harness read the line
}

// Outcome is how one rank of a job ended.
type Outcome struct {
	Rank     int
	Ready    bool     // it printed ready
	Done     bool     // it printed done
	Iters    int      // the count its done line gave
	CloseErr string   // its closeerr line, if any
	Fail     *Failure // its fail line, if any
	Wrong    string   // its wrong line, if any
	Exit     error    // its exit (nil: status 0)
	Exited   time.Time
	Hung     bool   // still running at the end of Wait
	Output   string // everything it printed
}

// Job is a running world of ranks.
type Job struct {
	cmds    []*exec.Cmd
	port    int
	outs    []*lockedBuffer
	results []Outcome
	ready   chan int
	wg      sync.WaitGroup
	mu      sync.Mutex // guards results
	cancel  context.CancelFunc
	wait    time.Duration
	start   time.Time
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start starts the ranks of scenario with extra variables env.
func Start(ctx context.Context, o Options, scenario string, env ...string) (*Job, error) {
	if o.Ranks == 0 {
		o.Ranks = 4
	}
	if o.Wait == 0 {
		o.Wait = time.Minute
	}
	if o.Command == nil {
		return nil, fmt.Errorf("faults: Options.Command is nil")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	base := o.Env
	if base == nil {
		base = cleanEnv()
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &Job{ready: make(chan int, o.Ranks), cancel: cancel, wait: o.Wait, start: time.Now(),
		results: make([]Outcome, o.Ranks), port: port}
	for r := range o.Ranks {
		cmd := o.Command(ctx, r)
		cmd.Env = append(append([]string(nil), base...), RoleEnv+"="+scenario,
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(o.Ranks),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(o.Ranks),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
		if o.Transport != "" {
			cmd.Env = append(cmd.Env, "GOCOMM_TRANSPORT="+o.Transport)
		}
		cmd.Env = append(cmd.Env, env...)
		if o.RankEnv != nil {
			cmd.Env = append(cmd.Env, o.RankEnv(r)...)
		}
		out := &lockedBuffer{}
		cmd.Stderr = out
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			j.Stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			j.Stop()
			return nil, err
		}
		j.cmds = append(j.cmds, cmd)
		j.outs = append(j.outs, out)
		j.results[r].Rank = r
		j.wg.Go(func() { j.follow(r, cmd, stdout, out) })
	}
	return j, nil
}

// follow reads rank r's lines until it exits.
func (j *Job) follow(r int, cmd *exec.Cmd, stdout interface{ Read([]byte) (int, error) }, out *lockedBuffer) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(out, line)
		j.mu.Lock()
		res := &j.results[r]
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "ready":
			if !res.Ready {
				res.Ready = true
				j.ready <- r
			}
		case "done":
			res.Done = true
			res.Iters, _ = strconv.Atoi(rest)
		case "closeerr":
			res.CloseErr = rest
		case "wrong":
			res.Wrong = rest
		case "fail":
			if f, ok := parseFailure(rest); ok && res.Fail == nil {
				f.At = time.Now()
				res.Fail = f
			}
		}
		j.mu.Unlock()
	}
	err := cmd.Wait()
	j.mu.Lock()
	j.results[r].Exit, j.results[r].Exited = err, time.Now()
	j.mu.Unlock()
}

func parseFailure(s string) (*Failure, bool) {
	f := strings.SplitN(s, " ", 5)
	if len(f) < 5 {
		return nil, false
	}
	origin, err1 := strconv.Atoi(f[0])
	reporter, err2 := strconv.Atoi(f[2])
	ms, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, false
	}
	return &Failure{Origin: origin, Kind: f[1], Reporter: reporter, Took: time.Duration(ms) * time.Millisecond, Text: f[4]}, true
}

// AwaitReady waits until every rank printed ready, or one exited, or d
// passed.
func (j *Job) AwaitReady(d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for n := 0; n < len(j.cmds); n++ {
		select {
		case <-j.ready:
		case <-timer.C:
			return fmt.Errorf("faults: %d of %d ranks ready after %v", n, len(j.cmds), d)
		}
	}
	return nil
}

// Kill kills rank r with SIGKILL and returns when.
func (j *Job) Kill(r int) time.Time {
	now := time.Now()
	j.cmds[r].Process.Signal(syscall.SIGKILL)
	return now
}

// Port is the job's MASTER_PORT on 127.0.0.1 (the store's, unless
// Options.RankEnv moved it).
func (j *Job) Port() int { return j.port }

// PIDs are the ranks' process ids.
func (j *Job) PIDs() []int {
	pids := make([]int, len(j.cmds))
	for r, cmd := range j.cmds {
		pids[r] = cmd.Process.Pid
	}
	return pids
}

// Wait waits for every rank to exit, until Options.Wait after Start;
// ranks still running then are marked hung and killed.
func (j *Job) Wait() []Outcome {
	return j.WaitUntil(j.start.Add(j.wait))
}

// WaitUntil is Wait with its own deadline (e.g. a hang limit counted from
// a fault).
func (j *Job) WaitUntil(deadline time.Time) []Outcome {
	done := make(chan struct{})
	go func() {
		j.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		j.mu.Lock()
		for r := range j.results {
			if j.results[r].Exited.IsZero() {
				j.results[r].Hung = true
			}
		}
		j.mu.Unlock()
		j.Stop()
		<-done
	}
	j.cancel()
	j.mu.Lock()
	defer j.mu.Unlock()
	out := append([]Outcome(nil), j.results...)
	for r := range out {
		out[r].Output = j.outs[r].String()
	}
	return out
}

// Stop kills every rank still running.
func (j *Job) Stop() {
	for _, cmd := range j.cmds {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	j.cancel()
}

// KillTrial is one kill -9 trial's outcome.
type KillTrial struct {
	Victim   int
	Outcomes []Outcome
	Killed   time.Time
}

// Named counts the survivors whose failure names the victim as lost.
func (t *KillTrial) Named() (named, survivors int) {
	for _, o := range t.Outcomes {
		if o.Rank == t.Victim {
			continue
		}
		survivors++
		if o.Fail != nil && o.Fail.Origin == t.Victim && o.Fail.Kind == "lost" {
			named++
		}
	}
	return named, survivors
}

// TimesToFail are the survivors' times from the kill to their report of
// the failure.
func (t *KillTrial) TimesToFail() []time.Duration {
	var ds []time.Duration
	for _, o := range t.Outcomes {
		if o.Rank != t.Victim && o.Fail != nil {
			ds = append(ds, max(o.Fail.At.Sub(t.Killed), 0))
		}
	}
	return ds
}

// lostPeerText matches the lost peers an error's text names.
var lostPeerText = regexp.MustCompile(`rank (\d+): comm: peer connection lost`)

// NamedByText counts the survivors whose error text names only the victim
// as a lost peer ("rank V: comm: peer connection lost"), a criterion that
// also applies to errors without a structured root cause, for
// comparisons.
func (t *KillTrial) NamedByText() (named, survivors int) {
	for _, o := range t.Outcomes {
		if o.Rank == t.Victim {
			continue
		}
		survivors++
		if o.Fail == nil {
			continue
		}
		ms := lostPeerText.FindAllStringSubmatch(o.Fail.Text, -1)
		ok := len(ms) > 0
		for _, m := range ms {
			ok = ok && m[1] == strconv.Itoa(t.Victim)
		}
		if ok {
			named++
		}
	}
	return named, survivors
}

// Misnamed describes each survivor that did not name the victim.
func (t *KillTrial) Misnamed() []string {
	var s []string
	for _, o := range t.Outcomes {
		switch {
		case o.Rank == t.Victim:
		case o.Hung:
			s = append(s, fmt.Sprintf("rank %d killed; rank %d hung", t.Victim, o.Rank))
		case o.Fail == nil:
			s = append(s, fmt.Sprintf("rank %d killed; rank %d reported no failure: %.500s", t.Victim, o.Rank, o.Output))
		case o.Fail.Origin != t.Victim || o.Fail.Kind != "lost":
			s = append(s, fmt.Sprintf("rank %d killed; rank %d blames rank %d (%s): %s", t.Victim, o.Rank, o.Fail.Origin, o.Fail.Kind, o.Fail.Text))
		}
	}
	return s
}

// RunKillTrial runs the "loop" scenario, kills a random rank with SIGKILL
// at a random moment within killWithin of every rank being ready, and
// waits for the survivors.
func RunKillTrial(ctx context.Context, o Options, rng *rand.Rand, killWithin time.Duration) (*KillTrial, error) {
	j, err := Start(ctx, o, "loop", MaxEnv+"="+(o.waitOrDefault()/2).String())
	if err != nil {
		return nil, err
	}
	if err := j.AwaitReady(o.waitOrDefault()); err != nil {
		out := j.Wait()
		return nil, fmt.Errorf("%w; rank 0 said: %.500s", err, out[0].Output)
	}
	time.Sleep(time.Duration(rng.Int64N(int64(killWithin) + 1)))
	t := &KillTrial{Victim: rng.IntN(len(j.cmds))}
	t.Killed = j.Kill(t.Victim)
	t.Outcomes = j.Wait()
	return t, nil
}

func (o Options) waitOrDefault() time.Duration {
	if o.Wait == 0 {
		return time.Minute
	}
	return o.Wait
}

// RunExitJob runs the "exit" scenario: iters verified collectives of
// sizes drawn from seed, after which rank exiter (every rank if exiter is
// negative) exits at once without Close while the others Close. It
// returns the outcomes; the job passed if every rank is Done and exited
// with status 0. extra are more variables for the ranks.
func RunExitJob(ctx context.Context, o Options, iters int, seed uint64, exiter int, extra ...string) ([]Outcome, error) {
	env := append([]string{ItersEnv + "=" + strconv.Itoa(iters), SeedEnv + "=" + strconv.FormatUint(seed, 10)}, extra...)
	if exiter >= 0 {
		env = append(env, ExiterEnv+"="+strconv.Itoa(exiter))
	}
	j, err := Start(ctx, o, "exit", env...)
	if err != nil {
		return nil, err
	}
	return j.Wait(), nil
}

// RunLocalError runs scenario "local/<name>" with rank bad making the
// local error.
func RunLocalError(ctx context.Context, o Options, name string, bad int) ([]Outcome, error) {
	if _, ok := localCases[name]; !ok {
		return nil, fmt.Errorf("faults: unknown local case %q", name)
	}
	j, err := Start(ctx, o, "local/"+name, BadEnv+"="+strconv.Itoa(bad))
	if err != nil {
		return nil, err
	}
	return j.Wait(), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is this process's environment without a launcher's variables
// or gocomm's knobs, which would otherwise be misread by the ranks.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "PMI"), strings.HasPrefix(k, "SLURM"),
			strings.HasPrefix(k, "TORCHELASTIC_"), strings.HasPrefix(k, "MPI_LOCAL"), strings.HasPrefix(k, "GOCOMM_"),
			k == "RANK", k == "WORLD_SIZE", k == "LOCAL_RANK", k == "LOCAL_WORLD_SIZE",
			k == "MASTER_ADDR", k == "MASTER_PORT", k == "GROUP_RANK", k == "ROLE_RANK":
			continue
		}
		out = append(out, kv)
	}
	return out
}
