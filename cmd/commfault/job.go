package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gocomm/comm/env"
)

// event is one line a rank printed, or its exit (kind "exit").
type event struct {
	rank int
	kind string // ready, error, wrong, done, closeerr, exit
	at   time.Time
	// began, for an error of a collective, is when it was called.
	began time.Time
	text  string
	code  int // exit: the exit status (-1: killed by a signal)
}

// job is one running world of ranks.
type job struct {
	cmds   []*exec.Cmd
	events chan event
	stderr []*lockedBuffer
	wg     sync.WaitGroup
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the first MiB
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rankSpec says how to start rank r: the command (nil: this executable
// on this host) and the variables besides the launcher's.
type rankSpec struct {
	command func(ctx context.Context, name string, args ...string) *exec.Cmd
	env     []string
}

// baseEnv is this process's environment without any launcher's or
// gocomm's variables, so that an enclosing job's values are not misread.
func baseEnv() []string {
	drop := map[string]bool{}
	for _, k := range env.TorchVars() {
		drop[k] = true
	}
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "GOCOMM_") || strings.HasPrefix(k, "COMMFAULT_") ||
			strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "SLURM_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// worldEnv is the launcher's variables of rank r of size ranks.
func worldEnv(r, size, localRank, localSize int, masterAddr string, masterPort int) []string {
	return []string{
		"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(size),
		"LOCAL_RANK=" + strconv.Itoa(localRank), "LOCAL_WORLD_SIZE=" + strconv.Itoa(localSize),
		"MASTER_ADDR=" + masterAddr, "MASTER_PORT=" + strconv.Itoa(masterPort),
	}
}

// startJob starts one process per spec; each process's events arrive on
// job.events, its exit last.
func startJob(ctx context.Context, specs []rankSpec) (*job, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	j := &job{events: make(chan event, 64*len(specs))}
	for r, s := range specs {
		var cmd *exec.Cmd
		if s.command != nil {
			cmd = s.command(ctx, self)
		} else {
			cmd = exec.CommandContext(ctx, self)
		}
		cmd.Env = append(append(baseEnv(), envRole+"=rank"), s.env...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			j.kill()
			return nil, err
		}
		buf := &lockedBuffer{}
		cmd.Stderr = buf
		if err := cmd.Start(); err != nil {
			j.kill()
			return nil, fmt.Errorf("starting rank %d: %w", r, err)
		}
		j.cmds = append(j.cmds, cmd)
		j.stderr = append(j.stderr, buf)
		j.wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				j.events <- parseLine(r, sc.Text(), time.Now())
			}
			err := cmd.Wait()
			j.events <- event{rank: r, kind: "exit", at: time.Now(), code: exitCode(err, cmd)}
		})
	}
	return j, nil
}

// parseLine turns a rank's stdout line into an event; an error line's own
// time stamp replaces at.
func parseLine(r int, line string, at time.Time) event {
	kind, text, _ := strings.Cut(line, " ")
	ev := event{rank: r, kind: kind, at: at, text: text}
	if kind == "error" {
		ns, rest, _ := strings.Cut(text, " ")
		if n, err := strconv.ParseInt(ns, 10, 64); err == nil {
			ev.at, ev.text = time.Unix(0, n), rest
		}
		if b, rest, ok := strings.Cut(ev.text, " "); ok && strings.HasPrefix(b, "began=") {
			if n, err := strconv.ParseInt(strings.TrimPrefix(b, "began="), 10, 64); err == nil {
				ev.began, ev.text = time.Unix(0, n), rest
			}
		}
	}
	return ev
}

func exitCode(err error, cmd *exec.Cmd) int {
	if err == nil {
		return 0
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return -1
	}
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode()
	}
	return -2
}

// awaitReady waits until every rank printed ready; it returns the events
// of a rank that ended or failed first.
func (j *job) awaitReady(timeout time.Duration) ([]event, error) {
	ready := map[int]bool{}
	var early []event
	t := time.NewTimer(timeout)
	defer t.Stop()
	for len(ready) < len(j.cmds) {
		select {
		case ev := <-j.events:
			if ev.kind == "ready" {
				ready[ev.rank] = true
				continue
			}
			early = append(early, ev)
			if ev.kind == "exit" || ev.kind == "error" || ev.kind == "wrong" {
				return early, fmt.Errorf("rank %d before every rank was ready: %s %s (exit %d)", ev.rank, ev.kind, ev.text, ev.code)
			}
		case <-t.C:
			return early, fmt.Errorf("ranks not ready within %v (%d of %d)", timeout, len(ready), len(j.cmds))
		}
	}
	return early, nil
}

// collect gathers events until every rank has exited or the deadline
// passes; it returns the events and which ranks had not exited.
func (j *job) collect(deadline time.Time, already int) ([]event, []int) {
	var evs []event
	exited := map[int]bool{}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for len(exited)+already < len(j.cmds) {
		select {
		case ev := <-j.events:
			evs = append(evs, ev)
			if ev.kind == "exit" {
				exited[ev.rank] = true
			}
		case <-t.C:
			var left []int
			for r := range j.cmds {
				if !exited[r] && !j.gone(r, evs) {
					left = append(left, r)
				}
			}
			return evs, left
		}
	}
	return evs, nil
}

func (j *job) gone(r int, evs []event) bool {
	for _, ev := range evs {
		if ev.rank == r && ev.kind == "exit" {
			return true
		}
	}
	return false
}

// kill ends every rank still running and waits for their readers.
func (j *job) kill() {
	for _, c := range j.cmds {
		if c.Process != nil {
			c.Process.Kill()
		}
	}
	done := make(chan struct{})
	go func() {
		j.wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-j.events:
		case <-done:
			return
		}
	}
}

// freePort returns a TCP port free on host at the time of the call.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
