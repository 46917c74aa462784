package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// These tests build the real commrun and run this test binary under it as
// the ranks (roleEnv says what a rank does).
const roleEnv = "COMMRUN_TEST_ROLE"

func TestMain(m *testing.M) { testkit.MainErr(m, roleEnv, "RANK", rankMain, commrun.Remove) }

func rankMain(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch role {
	case "no-comm": // a program that never opens a world
		fmt.Println("no collective here")
		return nil
	case "interrupt":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		fmt.Println("ready")
		select {
		case <-ch:
			fmt.Println("got SIGINT")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c, err := comm.Init(ctx, comm.Options{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	switch role {
	case "allreduce":
		buf := []int64{int64(c.Rank())}
		if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
			return err
		}
		fmt.Printf("sum %d\n", buf[0])
		return nil
	case "profile-no-summary", "straggler":
		return profiledRank(ctx, c, role)
	case "allreduce-loop":
		if os.Getenv("COMMRUN_TEST_IGNORE_TERM") != "" {
			signal.Ignore(syscall.SIGTERM) // only the library can stop this rank
		}
		// Announce the pid, then all-reduce until a peer is gone.
		dir := os.Getenv("COMMRUN_TEST_DIR")
		if err := os.WriteFile(filepath.Join(dir, "rank"+strconv.Itoa(c.Rank())+".pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return err
		}
		buf := make([]float32, 1024)
		for {
			if err := comm.AllReduce(ctx, c, buf, buf, comm.Sum); err != nil {
				fmt.Printf("all-reduce failed: %v\n", err)
				return err
			}
		}
	}
	return fmt.Errorf("unknown role %q", role)
}

// commrun is the program under test.
var commrun = testkit.Binary{Name: "commrun"}

// buildCommrun builds cmd/commrun once for the tests.
func buildCommrun(t *testing.T) string {
	t.Helper()
	return commrun.Path(t)
}

func TestCommrunAllReduce(t *testing.T) {
	bin := buildCommrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-n", "3", "--timeout", "50s", "--", os.Args[0], "-test.run=^$")
	cmd.Env = testkit.LauncherFreeEnv(roleEnv + "=allreduce")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for r := range 3 {
		if want := fmt.Sprintf("[%d] sum 3\n", r); !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
