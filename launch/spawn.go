package launch

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gocomm/comm/env"
)

// Launched reports whether a launcher started this process as a rank:
// whether the environment (read through getenv; nil is os.Getenv) names a
// launcher family of the contract, even incompletely (comm.Init then says
// what is missing).
func Launched(getenv func(string) string) bool {
	world, err := env.Read(getenv)
	return err != nil || world.Launcher != env.LauncherNone
}

// Spawn makes the calling program a job of n ranks on this host when no
// launcher started it, as torch.multiprocessing.spawn does: it runs n
// copies of this executable, with the same arguments and the environment
// contract, and returns parent=true once they have all exited, with nil or
// the *JobError saying which rank failed and how. Their output appears on
// os.Stdout and os.Stderr prefixed with "[rank] ", and SIGINT and SIGTERM
// sent to this process meanwhile are forwarded to them.
//
// In a rank (a copy started by Spawn, or a process started by commrun,
// torchrun, mpirun or srun) Spawn returns parent=false at once and the
// program goes on to comm.Init. With n <= 1 it also returns false: the
// program is a world of one by itself.
func Spawn(ctx context.Context, n int) (parent bool, err error) {
	return SpawnConfig(ctx, Config{NProcs: n})
}

// SpawnConfig is Spawn with the rest of a Config: Timeout, KillGrace,
// Stdout, Stderr, Env, Signals, TailLines, Name. Program and Args default
// to this executable and its arguments; Name defaults to the executable's
// base name.
func SpawnConfig(ctx context.Context, cfg Config) (parent bool, err error) {
	getenv := os.Getenv
	if cfg.Env != nil {
		getenv = envLookup(cfg.Env)
	}
	if Launched(getenv) || cfg.NProcs <= 1 {
		return false, nil
	}
	if cfg.Program == "" {
		exe, err := os.Executable()
		if err != nil {
			return true, fmt.Errorf("launch: Spawn: cannot find this executable to start its ranks: %w", err)
		}
		cfg.Program, cfg.Args = exe, os.Args[1:]
	}
	if cfg.Name == "" {
		cfg.Name = filepath.Base(cfg.Program)
	}
	if cfg.Signals == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		cfg.Signals = ch
	}
	return true, Run(ctx, cfg)
}

// envLookup is a getenv over a "K=V" list (the last value wins, as in
// os/exec).
func envLookup(env []string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return func(k string) string { return m[k] }
}
