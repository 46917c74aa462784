//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/launch"
)

// killWatch is the ranks' output; once rank 0 has finished epoch 1 it
// kills rank victim with SIGKILL, mid-training.
type killWatch struct {
	victim int
	mu     sync.Mutex // protects following
	out    bytes.Buffer
	pid    int
	killed bool
	err    error
}

var pidLine = regexp.MustCompile(`^\[(\d+)\] train: rank \d+ is pid (\d+)`)

func (k *killWatch) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.out.Write(p)
	if m := pidLine.FindSubmatch(p); m != nil {
		if r, _ := strconv.Atoi(string(m[1])); r == k.victim {
			k.pid, _ = strconv.Atoi(string(m[2]))
		}
	}
	if !k.killed && k.pid > 0 && bytes.HasPrefix(p, []byte("[0] epoch 1/")) {
		k.killed = true
		k.err = syscall.Kill(k.pid, syscall.SIGKILL)
	}
	return len(p), nil
}

func (k *killWatch) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

var survivedLine = regexp.MustCompile(`train: done: 3 ranks, 4 epochs, loss ([0-9.]+), test loss ([0-9.]+), test accuracy ([0-9.]+)%`)

// Rank 2 of 4 is killed with SIGKILL during epoch 2; under commrun
// -keep-going the other three shrink the world past it (Comm.Shrink), take
// rank 0's parameters and place, and finish training with a sane loss and
// identical parameters.
func TestTrainSurvivesAKilledRank(t *testing.T) {
	bin := buildTrain(t)
	w := &killWatch{victim: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := launch.Run(ctx, launch.Config{NProcs: 4, Program: bin,
		Args: []string{"-shrink", "-epochs", "4", "-samples", "4096", "-hidden", "64", "-timeout", "30s"},
		Env:  testkit.LauncherFreeEnv(), Stdout: w, Stderr: w, KeepGoing: true, Timeout: 150 * time.Second})
	out := w.String()
	if !w.killed || w.err != nil {
		t.Fatalf("rank 2 was not killed (pid %d): %v\n%s", w.pid, w.err, out)
	}
	var je *launch.JobError
	if !errors.As(err, &je) || je.First == nil || je.First.Rank != 2 || je.First.Signal != syscall.SIGKILL {
		t.Fatalf("want the job to fail with rank 2 killed first, got %v\n%s", err, out)
	}
	for _, r := range []int{0, 1, 3} {
		if ex := je.Ranks[r]; ex.Failed() {
			t.Errorf("survivor %d: %s", r, ex.Status())
		}
	}
	if !bytes.Contains([]byte(out), []byte("train: survived: 3 ranks go on from epoch 2")) {
		t.Errorf("no recovery in epoch 2:\n%s", out)
	}
	m := survivedLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no final line of 3 ranks:\n%s", out)
	}
	loss, _ := strconv.ParseFloat(m[1], 64)
	acc, _ := strconv.ParseFloat(m[3], 64)
	// The same bounds as an undisturbed run's (TestTrainLearnsAndRanksAgree).
	if loss > 0.7 || acc < 75 {
		t.Errorf("survivors did not learn: loss %.4f, test accuracy %.2f%%\n%s", loss, acc, out)
	}
	if !bytes.Contains([]byte(out), []byte("parameters identical on all 3 ranks")) {
		t.Errorf("no identical-parameters check on the survivors:\n%s", out)
	}
	t.Logf("survivors: loss %.4f, test accuracy %.2f%%; the run:\n%s", loss, acc, out)
}
