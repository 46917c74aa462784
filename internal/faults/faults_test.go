package faults_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/faults"
	"github.com/gocomm/comm/internal/testkit"
)

// The tests re-execute this test binary as the ranks.
func TestMain(m *testing.M) {
	testkit.MainErr(m, faults.RoleEnv, "RANK", func(role string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return faults.Rank(ctx, role)
	})
}

func options(transport string) faults.Options {
	return faults.Options{
		Ranks:     4,
		Transport: transport,
		Command: func(ctx context.Context, _ int) *exec.Cmd {
			return exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		},
		Wait: 90 * time.Second,
	}
}

// TestKillNamesTheVictim: one of 4 ranks running verified all-reduces is
// killed with SIGKILL at a random moment; every survivor fails, naming the
// killed rank as lost, even though survivors exit right after their own
// failure (a cascade of exits). A few trials per transport; cmd's fault
// command runs a hundred.
func TestKillNamesTheVictim(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts 4 processes per trial; the full suite (CI, no -short) runs it")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			for trial := range 3 {
				kt, err := faults.RunKillTrial(testkit.Context(t, 5*time.Minute), options(tr), rng, 200*time.Millisecond)
				if err != nil {
					t.Fatalf("trial %d: %v", trial, err)
				}
				named, survivors := kt.Named()
				t.Logf("trial %d: rank %d killed; %d of %d survivors name it; times to fail %v", trial, kt.Victim, named, survivors, kt.TimesToFail())
				for _, m := range kt.Misnamed() {
					t.Error(m)
				}
				for _, o := range kt.Outcomes {
					if o.Wrong != "" {
						t.Errorf("rank %d: wrong result: %s", o.Rank, o.Wrong)
					}
				}
			}
		})
	}
}

// TestExitWithoutClose: every rank exits at once after its last verified
// all-reduce, with no Close: no rank's last collective may fail.
func TestExitWithoutClose(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts 4 processes per job; the full suite (CI, no -short) runs it")
	}
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			for job := range 4 {
				seed := uint64(time.Now().UnixNano())
				outs, err := faults.RunExitJob(testkit.Context(t, 5*time.Minute), options(tr), 3, seed, -1)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range outs {
					if !o.Done || o.Exit != nil || o.Fail != nil || o.Wrong != "" {
						t.Errorf("job %d (seed %d): rank %d: done %v, exit %v, hung %v; said: %.800s", job, seed, o.Rank, o.Done, o.Exit, o.Hung, o.Output)
					}
				}
			}
		})
	}
}

// TestLocalErrorsFailEveryRank: a rank that fails on its own in an object
// collective, a coalesced op or a collective with a bad argument fails
// every rank within seconds, each naming it.
func TestLocalErrorsFailEveryRank(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts 4 processes per case; the full suite (CI, no -short) runs it")
	}
	for _, name := range faults.LocalCases() {
		t.Run(name, func(t *testing.T) {
			bad := 2
			outs, err := faults.RunLocalError(testkit.Context(t, 5*time.Minute), options(""), name, bad)
			if err != nil {
				t.Fatal(err)
			}
			var took []time.Duration
			for _, o := range outs {
				switch {
				case o.Hung:
					t.Errorf("rank %d hung", o.Rank)
				case o.Fail == nil:
					t.Errorf("rank %d reported no failure: %.800s", o.Rank, o.Output)
				case o.Fail.Origin != bad:
					t.Errorf("rank %d blames rank %d (%s), want rank %d: %s", o.Rank, o.Fail.Origin, o.Fail.Kind, bad, o.Fail.Text)
				case o.Fail.Took > 10*time.Second:
					t.Errorf("rank %d took %v to fail: %s", o.Rank, o.Fail.Took, o.Fail.Text)
				}
				if o.Fail != nil {
					took = append(took, o.Fail.Took)
				}
			}
			slices.Sort(took)
			if len(outs) > 0 && outs[0].Fail != nil {
				t.Logf("every rank failed within %v; rank 0: %s", took[len(took)-1], outs[0].Fail.Text)
			}
		})
	}
}
