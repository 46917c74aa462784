package main

import (
	"fmt"
	"strings"

	"github.com/gocomm/comm/profile"
)

// profileConfig is the main job's comms-logger configuration: the
// environment's (GOCOMM_PROFILE and the other variables profile.FromEnv
// reads, through getenv), with the -profile and -trace-dir flags on top
// when they were given on the command line (cfg.flagsGiven): flags
// override the environment. With neither, the logger is cfg.profile's
// default (on). A bad variable is an error naming it.
func (cfg config) profileConfig(getenv func(string) string) (*profile.Config, error) {
	prof, err := profile.FromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if prof == nil {
		// FromEnv says nil both when nothing is set and when GOCOMM_PROFILE
		// switches the logger off.
		prof = &profile.Config{Enabled: cfg.profile && !profileEnvSet(getenv)}
	}
	if cfg.flagsGiven["profile"] {
		prof.Enabled = cfg.profile
	}
	if cfg.flagsGiven["trace-dir"] {
		prof.TraceDir = cfg.traceDir
	}
	return prof, nil
}

// profileEnvSet reports whether any of the logger's variables is set.
func profileEnvSet(getenv func(string) string) bool {
	for _, name := range []string{profile.EnvProfile, profile.EnvProfileOps, profile.EnvProfileVerbose,
		profile.EnvProfileDebug, profile.EnvProfileLayout, profile.EnvTraceDir} {
		if strings.TrimSpace(getenv(name)) != "" {
			return true
		}
	}
	return false
}
