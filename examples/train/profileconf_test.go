package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/launch"
	"github.com/gocomm/comm/profile"
)

// The main job's comms logger: GOCOMM_PROFILE and the other variables
// unless -profile or -trace-dir are given, which override them.
func TestProfileConfigFlagsOverrideEnv(t *testing.T) {
	const allReduceOnly = `{"enabled": true, "prof_all": false, "prof_ops": ["all_reduce"]}`
	type want struct {
		enabled, opsOnly bool
		ops              []string
		traceDir         string
	}
	cases := []struct {
		name  string
		env   map[string]string
		flags []string // -name=value as on the command line
		want  want
	}{
		{"no environment: on", nil, nil, want{enabled: true}},
		{"no environment, -profile=false", nil, []string{"-profile=false"}, want{}},
		{"GOCOMM_PROFILE block", map[string]string{"GOCOMM_PROFILE": allReduceOnly}, nil,
			want{enabled: true, opsOnly: true, ops: []string{"all_reduce"}}},
		{"GOCOMM_PROFILE block, -profile=false", map[string]string{"GOCOMM_PROFILE": allReduceOnly}, []string{"-profile=false"},
			want{opsOnly: true, ops: []string{"all_reduce"}}},
		{"block switched off, -profile", map[string]string{"GOCOMM_PROFILE": `{"enabled": false, "prof_ops": ["broadcast"], "prof_all": false}`},
			[]string{"-profile"}, want{enabled: true, opsOnly: true, ops: []string{"broadcast"}}},
		{"GOCOMM_PROFILE=0", map[string]string{"GOCOMM_PROFILE": "0"}, nil, want{}},
		{"GOCOMM_PROFILE=0, -profile", map[string]string{"GOCOMM_PROFILE": "0"}, []string{"-profile=true"}, want{enabled: true}},
		{"GOCOMM_PROFILE_OPS", map[string]string{"GOCOMM_PROFILE_OPS": "all_reduce"}, nil,
			want{enabled: true, opsOnly: true, ops: []string{"all_reduce"}}},
		{"GOCOMM_TRACE_DIR (commrun --trace-dir)", map[string]string{"GOCOMM_TRACE_DIR": "/env"}, nil,
			want{enabled: true, traceDir: "/env"}},
		{"GOCOMM_TRACE_DIR, -trace-dir", map[string]string{"GOCOMM_TRACE_DIR": "/env"}, []string{"-trace-dir=/flag"},
			want{enabled: true, traceDir: "/flag"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.flagsGiven = map[string]bool{}
			for _, f := range tc.flags {
				name, value, _ := strings.Cut(strings.TrimPrefix(f, "-"), "=")
				cfg.flagsGiven[name] = true
				switch name {
				case "profile":
					cfg.profile = value != "false"
				case "trace-dir":
					cfg.traceDir = value
				}
			}
			got, err := cfg.profileConfig(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			g := want{got.Enabled, got.OpsOnly, got.Ops, got.TraceDir}
			if g.enabled != tc.want.enabled || g.opsOnly != tc.want.opsOnly || !slices.Equal(g.ops, tc.want.ops) || g.traceDir != tc.want.traceDir {
				t.Fatalf("env %v, flags %v: %+v, want %+v", tc.env, tc.flags, g, tc.want)
			}
		})
	}
	_, err := defaultConfig().profileConfig(func(k string) string {
		if k == profile.EnvProfile {
			return `{"prof_ops": "all_reduce"}` // a string, not a list
		}
		return ""
	})
	if !errors.Is(err, profile.ErrConfig) || !strings.Contains(err.Error(), "GOCOMM_PROFILE") {
		t.Fatalf("a bad GOCOMM_PROFILE: %v, want an error naming the variable", err)
	}
}

// The built program on 2 ranks with the GOCOMM_PROFILE profiles
// only the all-reduces; -profile=false still switches the logger off.
func TestProfileFromEnvironment(t *testing.T) {
	bin := buildTrain(t)
	run := func(env []string, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args = append([]string{"-epochs", "1", "-samples", "1024", "-hidden", "16"}, args...)
		err := launch.Run(ctx, launch.Config{NProcs: 2, Program: bin, Args: args, Env: testkit.LauncherFreeEnv(env...),
			Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatalf("%v %v: %v\n%s", env, args, err, out.String())
		}
		return out.String()
	}
	rows := func(out string) (allReduce, others bool) {
		return strings.Contains(out, "] all_reduce(avg) grads\n"),
			strings.Contains(out, "] broadcast\n") || strings.Contains(out, "] all_gather checksums\n")
	}
	if ar, others := rows(run([]string{"GOCOMM_PROFILE="})); !ar || !others {
		t.Fatalf("default run: all_reduce rows %v, broadcast or all_gather rows %v; want both (the default profiles every op)", ar, others)
	}
	env := []string{`GOCOMM_PROFILE={"enabled": true, "prof_all": false, "prof_ops": ["all_reduce"]}`}
	out := run(env)
	if ar, others := rows(out); !ar || others {
		t.Fatalf("with %s: all_reduce rows %v, other rows %v; want only all_reduce:\n%s", env[0], ar, others, out)
	}
	if out := run(env, "-profile=false"); strings.Contains(out, "Comm. Op") {
		t.Fatalf("-profile=false with %s printed a summary:\n%s", env[0], out)
	}
}
