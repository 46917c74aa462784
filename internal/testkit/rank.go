package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Main is a TestMain for packages whose tests re-run the test binary as a
// rank (or any other helper process). When the environment variable
// roleVar names a role, this process is such a rank: Main calls
// rank(role) and exits with the status it returns, without running any
// test. Otherwise Main runs the tests, then every func in after (cleanup
// of what the tests built once), and exits with the tests' status.
//
//	func TestMain(m *testing.M) { testkit.Main(m, roleEnv, rankMain) }
func Main(m *testing.M, roleVar string, rank func(role string) int, after ...func()) {
	if role := os.Getenv(roleVar); role != "" {
		os.Exit(rank(role))
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// MainErr is Main for ranks whose work returns an error: a rank that
// fails prints "<role> rank <$rankVar>: <err>" to stderr and exits 1.
func MainErr(m *testing.M, roleVar, rankVar string, rank func(role string) error, after ...func()) {
	Main(m, roleVar, func(role string) int {
		return Status(role+" rank "+os.Getenv(rankVar), rank(role))
	}, after...)
}

// Status is the exit status of a rank that ended with err: 0 for nil,
// else 1 after printing err to stderr prefixed with who (which role and
// rank failed), for the parent test's failure message.
func Status(who string, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", who, err)
	return 1
}

// RankCommand returns a command that runs this test binary as role: the
// test binary with -test.run=^$ (so that it runs no test), in the
// environment LauncherFreeEnv(roleVar=role, env...). The caller sets its
// output and starts it; ctx ends it.
func RankCommand(ctx context.Context, roleVar, role string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = LauncherFreeEnv(append([]string{roleVar + "=" + role}, env...)...)
	return cmd
}
