//go:build unix

// Command trials measures elastic recovery: it runs examples/train -elastic
// under commrun --elastic with an etcd store, kills (SIGKILL) a random rank
// at a random step of each trial, and records whether the job finished,
// whether every rank ended with the same parameters, the test accuracy
// against an undisturbed run's, and the time from the kill to training at
// full size again. With -torch K it also runs K trials of the same failure
// under torchrun's elastic agent (torch_ddp.py here, DDP on gloo, c10d
// rendezvous, --max-restarts), interleaved with the first K gocomm trials.
//
//	go build -o /tmp/train ./examples/train
//	go build -o /tmp/commrun ./cmd/commrun
//	go run ./examples/train/trials -train /tmp/train -commrun /tmp/commrun -n 100 -torch 20 > trials.txt
//
// It prints one line per trial and a summary; the progress of each trial
// goes to stderr. It is a measuring tool, not a test: the figures depend on
// the machine and its load.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gocomm/comm/internal/testkit"
)

type config struct {
	train, commrun    string // binaries
	python, script    string // torchrun's python and the PyTorch script
	n, torch          int    // gocomm trials, torchrun trials
	ranks             int
	seed              uint64
	trainArgs         []string
	torchArgs         []string
	ckptEvery         int
	torchMonitor      float64
	timeout           time.Duration
	firstStep, margin int // kill at a step in [firstStep, total-margin]
}

func main() {
	cfg := config{ranks: 4, ckptEvery: 1, firstStep: 20, margin: 20}
	dir, _ := os.Getwd()
	flag.StringVar(&cfg.train, "train", "", "the examples/train binary")
	flag.StringVar(&cfg.commrun, "commrun", "", "the commrun binary")
	flag.StringVar(&cfg.python, "python", "/usr/bin/python3", "the python with torch")
	flag.StringVar(&cfg.script, "script", filepath.Join(dir, "examples/train/trials/torch_ddp.py"), "the PyTorch training script")
	flag.IntVar(&cfg.n, "n", 100, "gocomm trials")
	flag.IntVar(&cfg.torch, "torch", 0, "torchrun trials, interleaved with the first gocomm trials")
	flag.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()), "seed of the victims and kill steps")
	flag.IntVar(&cfg.ckptEvery, "ckpt-every", cfg.ckptEvery, "torch: checkpoint every this many steps")
	flag.Float64Var(&cfg.torchMonitor, "torch-monitor", 5, "torchrun --monitor_interval, seconds (5 is its default)")
	flag.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "bound of one trial")
	flag.Parse()
	if cfg.train == "" || cfg.commrun == "" {
		fmt.Fprintln(os.Stderr, "trials: give -train and -commrun (built binaries)")
		os.Exit(2)
	}
	model := []string{"-hidden", "128", "-samples", "16384", "-epochs", "3"}
	cfg.trainArgs = append([]string{"-elastic", "-profile=false", "-log-steps", "-timeout", "60s"}, model...)
	cfg.torchArgs = []string{"--hidden", "128", "--samples", "16384", "--epochs", "3", "--ckpt-every", strconv.Itoa(cfg.ckptEvery)}
	if err := run(cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "trials:", err)
		os.Exit(1)
	}
}

// outcome is one trial's record.
type outcome struct {
	kind      string // gocomm or torch
	victim    int    // rank killed (-1: none)
	killStep  int    // the step rank 0 had logged when the victim was killed
	finished  bool
	identical bool
	accuracy  float64
	recovery  time.Duration // kill to a step at full size after the change
	shrunk    time.Duration // gocomm: kill to the smaller world stepping
	resumed   int           // the step training went on from
	elapsed   time.Duration
	note      string
}

func (o outcome) String() string {
	return fmt.Sprintf("%s victim=%d kill_step=%d finished=%t identical=%t accuracy=%.2f recovery_ms=%d shrunk_ms=%d resumed_from=%d steps_lost=%d elapsed_s=%.1f%s",
		o.kind, o.victim, o.killStep, o.finished, o.identical, o.accuracy, o.recovery.Milliseconds(), o.shrunk.Milliseconds(), o.resumed, o.lost(), o.elapsed.Seconds(), noteString(o.note))
}

// lost is the steps done before the kill that had to be done again.
func (o outcome) lost() int {
	if o.victim < 0 {
		return 0
	}
	return max(o.killStep-o.resumed, 0)
}

func noteString(s string) string {
	if s == "" {
		return ""
	}
	return " note=" + strconv.Quote(s)
}

func run(cfg config, out, progress io.Writer) error {
	etcdDir, err := os.MkdirTemp("", "trials-etcd")
	if err != nil {
		return err
	}
	defer os.RemoveAll(etcdDir)
	etcd, err := testkit.NewEtcd(etcdDir)
	if err != nil {
		return err
	}
	if err := etcd.Start(); err != nil {
		return err
	}
	defer etcd.Kill()
	rng := rand.New(rand.NewPCG(cfg.seed, 1))
	fmt.Fprintf(out, "# trials: seed %d, %d ranks, train %s, torch %s, checkpoint every %d steps, torchrun monitor interval %gs, started %s\n",
		cfg.seed, cfg.ranks, strings.Join(cfg.trainArgs, " "), strings.Join(cfg.torchArgs, " "), cfg.ckptEvery, cfg.torchMonitor, time.Now().UTC().Format(time.RFC3339))
	total := 384 // steps of the configuration above: 16384 / (32 x 4) x 3
	pick := func() (int, int) {
		return rng.IntN(cfg.ranks), cfg.firstStep + rng.IntN(total-cfg.firstStep-cfg.margin)
	}

	base := gocommTrial(cfg, etcd.Endpoint(), "base", -1, 0)
	fmt.Fprintln(out, base)
	var goRuns, torchRuns []outcome
	var torchBase outcome
	if cfg.torch > 0 {
		torchBase = torchTrial(cfg, -1, 0)
		fmt.Fprintln(out, torchBase)
	}
	for i := range cfg.n {
		v, k := pick()
		o := gocommTrial(cfg, etcd.Endpoint(), strconv.Itoa(i), v, k)
		fmt.Fprintf(out, "%d %v\n", i, o)
		fmt.Fprintf(progress, "gocomm trial %d: %v\n", i, o)
		goRuns = append(goRuns, o)
		if i < cfg.torch {
			v, k := pick()
			o := torchTrial(cfg, v, k)
			fmt.Fprintf(out, "%d %v\n", i, o)
			fmt.Fprintf(progress, "torch trial %d: %v\n", i, o)
			torchRuns = append(torchRuns, o)
		}
	}
	fmt.Fprintln(out, summary("gocomm", goRuns, base.accuracy))
	if cfg.torch > 0 {
		fmt.Fprintln(out, summary("gocomm, first "+strconv.Itoa(cfg.torch), goRuns[:min(cfg.torch, len(goRuns))], base.accuracy))
		fmt.Fprintln(out, summary("torch", torchRuns, torchBase.accuracy))
	}
	return nil
}

// summary is a line of totals over runs: finished, identical, the largest
// accuracy difference from base, and the recovery times' median and 90th
// percentile.
func summary(kind string, runs []outcome, base float64) string {
	var fin, same int
	var worst float64
	var rec []time.Duration
	lost := 0
	for _, o := range runs {
		if o.finished {
			fin++
			worst = max(worst, math.Abs(o.accuracy-base))
		}
		if o.identical {
			same++
		}
		if o.recovery > 0 {
			rec = append(rec, o.recovery)
		}
		lost = max(lost, o.lost())
	}
	slices.Sort(rec)
	q := func(p float64) time.Duration {
		if len(rec) == 0 {
			return 0
		}
		return rec[min(len(rec)-1, int(p*float64(len(rec))))]
	}
	return fmt.Sprintf("# %s: %d/%d finished, %d/%d identical parameters, max |accuracy - undisturbed %.2f| = %.2f points, recovery median %d ms, p90 %d ms, max %d ms (%d measured), most steps lost %d",
		kind, fin, len(runs), same, len(runs), base, worst, q(0.5).Milliseconds(), q(0.9).Milliseconds(), q(1).Milliseconds(), len(rec), lost)
}

var (
	goPid     = regexp.MustCompile(`train: rank (\d+) is pid (\d+)`)
	goStep    = regexp.MustCompile(`train: step (\d+)/(\d+) on (\d+) ranks, unix ms (\d+)`)
	goChange  = regexp.MustCompile(`train: elastic: (\d+) ranks \(were (\d+)\) go on from step (\d+), unix ms (\d+)`)
	goStepped = regexp.MustCompile(`train: elastic: (\d+) ranks stepping at step (\d+), unix ms (\d+)`)
	goDone    = regexp.MustCompile(`train: done: (\d+) ranks, .* test accuracy ([0-9.]+)%`)

	torchPid     = regexp.MustCompile(`torch: rank (\d+) is pid (\d+) \(restart 0\)`)
	torchStep    = regexp.MustCompile(`torch: step (\d+)/(\d+) on (\d+) ranks, unix ms (\d+)`)
	torchRestart = regexp.MustCompile(`torch: (\d+) ranks, restart ([1-9]\d*), from step (\d+)/`)
	torchStepped = regexp.MustCompile(`torch: (\d+) ranks stepping at step (\d+), unix ms (\d+)`)
	torchDone    = regexp.MustCompile(`torch: done: (\d+) ranks, test accuracy ([0-9.]+)%, parameters identical: (True|False)`)
)

// watcher reads a job's output line by line, kills the victim once the
// job has logged step killStep, and fills an outcome from what it reads.
type watcher struct {
	ranks     int
	victim    int
	killStep  int
	pid       map[int]int
	pidLine   *regexp.Regexp
	stepLine  *regexp.Regexp
	killedAt  time.Time
	o         *outcome
	onLine    func(w *watcher, line string)
	full      strings.Builder
	killError error
}

func (w *watcher) read(r io.Reader, mu *sync.Mutex) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		mu.Lock()
		w.line(line)
		mu.Unlock()
	}
}

func (w *watcher) line(line string) {
	if !strings.Contains(line, " step ") {
		w.full.WriteString(line + "\n")
	}
	// All of a line's matches: the output of ranks that write to one pipe
	// can share a line.
	for _, m := range w.pidLine.FindAllStringSubmatch(line, -1) {
		if w.killedAt.IsZero() {
			r, _ := strconv.Atoi(m[1])
			p, _ := strconv.Atoi(m[2])
			w.pid[r] = p
		}
	}
	if m := w.stepLine.FindStringSubmatch(line); m != nil {
		s, _ := strconv.Atoi(m[1])
		if w.victim >= 0 && w.killedAt.IsZero() && s >= w.killStep && len(w.pid) == w.ranks {
			w.killedAt = time.Now()
			w.killError = syscall.Kill(w.pid[w.victim], syscall.SIGKILL)
		}
		// The step rank 0 had finished when the victim died, by the
		// lines' stamps: output can lag behind the training.
		if w.killedAt.IsZero() || w.sinceKill(m[4]) <= 0 {
			w.o.killStep = max(w.o.killStep, s)
		}
	}
	w.onLine(w, line)
}

// sinceKill is the time from the kill to a line's unix ms stamp.
func (w *watcher) sinceKill(ms string) time.Duration {
	t, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(t).Sub(w.killedAt)
}

// runJob runs cmd to completion under w.
func runJob(cmd *exec.Cmd, w *watcher, timeout time.Duration) error {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() { w.read(pr, &mu); close(done) }()
	timer := time.AfterFunc(timeout, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	timer.Stop()
	pw.Close()
	<-done
	// Whatever the job left behind (a stuck worker) goes with its group.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return err
}

func gocommTrial(cfg config, etcd, name string, victim, killStep int) outcome {
	o := outcome{kind: "gocomm", victim: victim}
	prefix := fmt.Sprintf("trials-%d-%s", cfg.seed, name)
	args := append([]string{"-n", strconv.Itoa(cfg.ranks), "--elastic", "2:" + strconv.Itoa(cfg.ranks), "--max-restarts", "3", "--", cfg.train}, cfg.trainArgs...)
	cmd := exec.Command(cfg.commrun, args...)
	cmd.Env = append(os.Environ(), "GOCOMM_INIT_METHOD=etcd://"+etcd+"/"+prefix)
	w := &watcher{ranks: cfg.ranks, victim: victim, killStep: killStep, pid: map[int]int{}, pidLine: goPid, stepLine: goStep, o: &o}
	afterKill := func(w *watcher, line string) {
		if w.killedAt.IsZero() {
			return
		}
		if m := goChange.FindStringSubmatch(line); m != nil && o.resumed == 0 {
			o.resumed, _ = strconv.Atoi(m[3])
		}
		if m := goStepped.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if n < cfg.ranks && o.shrunk == 0 {
				o.shrunk = w.sinceKill(m[3])
			}
			if n == cfg.ranks && o.recovery == 0 {
				o.recovery = w.sinceKill(m[3])
			}
		}
	}
	w.onLine = func(w *watcher, line string) {
		afterKill(w, line)
		if m := goDone.FindStringSubmatch(line); m != nil {
			// The program compared every rank's parameter checksum
			// (an all-gather) before it printed its final line.
			o.accuracy, _ = strconv.ParseFloat(m[2], 64)
			n, _ := strconv.Atoi(m[1])
			o.identical = n == cfg.ranks && strings.Contains(w.full.String(), "parameters identical on all "+m[1]+" ranks")
		}
	}
	start := time.Now()
	err := runJob(cmd, w, cfg.timeout)
	o.elapsed = time.Since(start)
	o.finished = err == nil && o.accuracy > 0
	o.note = trialNote(w, err)
	return o
}

// trialNote says what went wrong in a trial, with the end of its output.
func trialNote(w *watcher, err error) string {
	var why []string
	if w.killError != nil {
		why = append(why, "kill: "+w.killError.Error())
	}
	if w.victim >= 0 && w.killedAt.IsZero() {
		why = append(why, fmt.Sprintf("never killed (pids seen: %v, kill at step %d)", w.pid, w.killStep))
	}
	if err != nil {
		out := w.full.String()
		why = append(why, err.Error(), out[max(0, len(out)-600):])
	}
	return strings.Join(why, "; ")
}

func torchTrial(cfg config, victim, killStep int) outcome {
	o := outcome{kind: "torch", victim: victim}
	dir, err := os.MkdirTemp("", "trials-torch")
	if err != nil {
		o.note = err.Error()
		return o
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		o.note = err.Error()
		return o
	}
	// -r/-t 0:1: Debian's torch 1.13 under Python 3.12 cannot parse the
	// default redirect "0"; rank 0's output is teed through a log file.
	args := []string{"-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", strconv.Itoa(cfg.ranks),
		"--max_restarts", "3", "--monitor_interval", strconv.FormatFloat(cfg.torchMonitor, 'g', -1, 64),
		"-r", "0:1", "-t", "0:1", "--log_dir", filepath.Join(dir, "logs"),
		"--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:" + strconv.Itoa(port),
		cfg.script, "--ckpt", filepath.Join(dir, "ckpt.pt")}
	cmd := exec.Command(cfg.python, append(args, cfg.torchArgs...)...)
	w := &watcher{ranks: cfg.ranks, victim: victim, killStep: killStep, pid: map[int]int{}, pidLine: torchPid, stepLine: torchStep, o: &o}
	w.onLine = func(w *watcher, line string) {
		if !w.killedAt.IsZero() {
			if m := torchRestart.FindStringSubmatch(line); m != nil && o.resumed == 0 {
				o.resumed, _ = strconv.Atoi(m[3])
			}
			if m := torchStepped.FindStringSubmatch(line); m != nil && o.recovery == 0 {
				o.recovery = w.sinceKill(m[3])
			}
		}
		if m := torchDone.FindStringSubmatch(line); m != nil {
			o.accuracy, _ = strconv.ParseFloat(m[2], 64)
			n, _ := strconv.Atoi(m[1])
			o.identical = n == cfg.ranks && m[3] == "True"
		}
	}
	start := time.Now()
	err = runJob(cmd, w, cfg.timeout)
	o.elapsed = time.Since(start)
	o.finished = err == nil && o.accuracy > 0
	o.note = trialNote(w, err)
	return o
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
