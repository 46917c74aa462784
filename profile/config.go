package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ErrConfig is wrapped by every error ParseConfig, FromEnv and
// Config.Validate return; the message names the key or variable to fix.
var ErrConfig = errors.New("profile: bad configuration")

// Environment variables FromEnv reads. comm.Init reads them (through
// FromEnv) when Options.Profile is nil.
const (
	// EnvProfile switches the comms logger on or off, or names its
	// configuration: "1"/"true"/"on" (every op, defaults), "0"/"false"/"off"
	// (off, whatever the other variables say), a JSON object written inline
	// ({"prof_ops": ["all_reduce"]}), or the path of a JSON file, which may be
	// a whole DeepSpeed config whose "comms_logger" block is read.
	EnvProfile = "GOCOMM_PROFILE"
	// EnvProfileOps lists, comma separated, the op names or log names to
	// profile (prof_ops with prof_all false): "all_reduce,grad_sync".
	EnvProfileOps = "GOCOMM_PROFILE_OPS"
	// EnvProfileVerbose prints one line per profiled op on world rank 0.
	EnvProfileVerbose = "GOCOMM_PROFILE_VERBOSE"
	// EnvProfileDebug appends the calling function to every record name.
	EnvProfileDebug = "GOCOMM_PROFILE_DEBUG"
	// EnvProfileLayout chooses the summary's units: "gbs" (default) or
	// "deepspeed" (DeepSpeed's Gbps columns).
	EnvProfileLayout = "GOCOMM_PROFILE_LAYOUT"
	// EnvTraceDir is the directory where LogSummary leaves each rank's
	// Chrome/Perfetto trace (TraceFileName), for a launcher to merge.
	EnvTraceDir = "GOCOMM_TRACE_DIR"
)

// Config configures the comms logger. Its keys are those of DeepSpeed's
// "comms_logger" block (enabled, verbose, prof_all, prof_ops, debug) plus
// gocomm's own (layout, trace_dir, clock_sync). The zero value is off;
// Config{Enabled: true} profiles every operation.
//
// Unlike DeepSpeed, Enabled is honoured (a block with "enabled": false is
// off), and Ops match operation names as well as log names.
type Config struct {
	// Enabled switches the logger on ("enabled").
	Enabled bool
	// Verbose prints one line per profiled op on world rank 0, to Output
	// ("verbose").
	Verbose bool
	// OpsOnly limits profiling to the operations named in Ops and the calls
	// forced with comm.WithProfiling ("prof_all": false). The default
	// profiles every operation, as DeepSpeed's prof_all: true does.
	OpsOnly bool
	// Ops names the operations to profile when OpsOnly is set ("prof_ops"):
	// op names (all_reduce, all_gather, ...; DeepSpeed's spellings such as
	// all_gather_into_tensor or all_to_all_single are accepted) or log names
	// given with comm.WithLogName.
	Ops []string
	// Debug appends " | [Caller Func: <func>]" to every record name, where
	// func is the first caller outside package comm ("debug").
	Debug bool
	// Layout chooses the summary's bandwidth units and column titles
	// ("layout": "gbs" or "deepspeed").
	Layout Layout
	// TraceDir, when set, is where LogSummary writes this rank's trace,
	// or the world's Close when the program never called LogSummary
	// ("trace_dir").
	TraceDir string
	// ClockSync says when the straggler analysis estimates clock offsets
	// between ranks ("clock_sync": "auto", "always" or "off").
	ClockSync ClockSync
	// Output receives the verbose lines, and the summary that the world's
	// Close prints on rank 0 when the program never called LogSummary;
	// nil is os.Stderr.
	Output io.Writer
}

// Validate reports a configuration that cannot be used. A nil *Config is
// valid (it means "not configured").
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if c.Layout != LayoutGBs && c.Layout != LayoutDeepSpeed {
		return fmt.Errorf("%w: layout %v, want gbs or deepspeed", ErrConfig, c.Layout)
	}
	if c.ClockSync < ClockSyncAuto || c.ClockSync > ClockSyncOff {
		return fmt.Errorf("%w: clock_sync %v, want auto, always or off", ErrConfig, c.ClockSync)
	}
	for i, op := range c.Ops {
		if strings.TrimSpace(op) == "" {
			return fmt.Errorf("%w: prof_ops[%d] is empty", ErrConfig, i)
		}
	}
	return nil
}

// Layout is the unit and column layout of the summary table.
type Layout int

// Layouts.
const (
	// LayoutGBs reports nccl-tests' algbw and busbw in GB/s (1e9 bytes/s).
	LayoutGBs Layout = iota
	// LayoutDeepSpeed reproduces DeepSpeed's columns: tput and busbw in
	// Gbps (1e9 bits/s), with its all-reduce tput of 2S/t (see Bandwidth).
	LayoutDeepSpeed
)

func (l Layout) String() string {
	switch l {
	case LayoutGBs:
		return "gbs"
	case LayoutDeepSpeed:
		return "deepspeed"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// Set parses "gbs" (also "GB/s", "nccl") or "deepspeed" (also "gbps");
// *Layout is a flag.Value.
func (l *Layout) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "gbs", "gb/s", "nccl", "nccl-tests":
		*l = LayoutGBs
	case "deepspeed", "ds", "gbps":
		*l = LayoutDeepSpeed
	default:
		return fmt.Errorf("%w: layout %q, want gbs or deepspeed", ErrConfig, s)
	}
	return nil
}

// units is the bandwidth unit the layout prints.
func (l Layout) units() string {
	if l == LayoutDeepSpeed {
		return "Gbps"
	}
	return "GB/s"
}

// ClockSync says when the straggler analysis estimates clock offsets.
type ClockSync int

// Clock synchronisation modes.
const (
	// ClockSyncAuto pings the ranks whose host name differs from rank 0's
	// (ranks on one host share its clock).
	ClockSyncAuto ClockSync = iota
	// ClockSyncAlways pings every rank.
	ClockSyncAlways
	// ClockSyncOff trusts the hosts' clocks (NTP or PTP).
	ClockSyncOff
)

func (s ClockSync) String() string {
	switch s {
	case ClockSyncAuto:
		return "auto"
	case ClockSyncAlways:
		return "always"
	case ClockSyncOff:
		return "off"
	}
	return "ClockSync(" + strconv.Itoa(int(s)) + ")"
}

// Set parses "auto", "always" or "off"; *ClockSync is a flag.Value.
func (s *ClockSync) Set(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "auto":
		*s = ClockSyncAuto
	case "always", "on":
		*s = ClockSyncAlways
	case "off", "never":
		*s = ClockSyncOff
	default:
		return fmt.Errorf("%w: clock_sync %q, want auto, always or off", ErrConfig, v)
	}
	return nil
}

// blockKeys are the keys a comms_logger block may hold.
var blockKeys = map[string]bool{
	"enabled": true, "verbose": true, "prof_all": true, "prof_ops": true, "debug": true,
	"layout": true, "trace_dir": true, "clock_sync": true,
}

// ParseConfig reads a JSON configuration: either a whole DeepSpeed config,
// whose "comms_logger" block is read as it is, or the block alone. Keys
// take DeepSpeed's defaults (enabled false, prof_all true); a config with
// no block is a Config that is off. An unknown key in the block is an error
// (it is usually a typo).
func ParseConfig(data []byte) (*Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrConfig, err)
	}
	if top == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrConfig)
	}
	block := top
	if raw, ok := top["comms_logger"]; ok {
		block = nil
		if err := json.Unmarshal(raw, &block); err != nil || block == nil {
			return nil, fmt.Errorf("%w: comms_logger is not a JSON object", ErrConfig)
		}
	} else if !anyKnown(top) {
		// A DeepSpeed config without the block: the logger is off.
		return &Config{}, nil
	}
	var unknown []string
	for k := range block {
		if !blockKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: comms_logger: unknown keys %q (known: enabled, verbose, prof_all, prof_ops, debug, layout, trace_dir, clock_sync)", ErrConfig, unknown)
	}
	cfg := &Config{}
	profAll := true
	var layout, clock string
	fields := []struct {
		key string
		dst any
	}{
		{"enabled", &cfg.Enabled}, {"verbose", &cfg.Verbose}, {"prof_all", &profAll},
		{"prof_ops", &cfg.Ops}, {"debug", &cfg.Debug}, {"layout", &layout},
		{"trace_dir", &cfg.TraceDir}, {"clock_sync", &clock},
	}
	for _, f := range fields {
		raw, ok := block[f.key]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return nil, fmt.Errorf("%w: comms_logger.%s: %v", ErrConfig, f.key, err)
		}
	}
	cfg.OpsOnly = !profAll
	if err := cfg.Layout.Set(layout); err != nil {
		return nil, err
	}
	if err := cfg.ClockSync.Set(clock); err != nil {
		return nil, err
	}
	return cfg, cfg.Validate()
}

func anyKnown(m map[string]json.RawMessage) bool {
	for k := range m {
		if blockKeys[k] {
			return true
		}
	}
	return false
}

// ReadConfigFile reads ParseConfig's format from a file.
func ReadConfigFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// FromEnv reads the logger's variables (EnvProfile and the others above)
// through getenv. It returns nil when none is set or when EnvProfile says
// off. EnvProfile, when set, says whether the logger is on (a file or
// inline JSON by its "enabled" key); otherwise any of the others switches
// it on. The others apply on top of EnvProfile's configuration.
func FromEnv(getenv func(string) string) (*Config, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	var cfg *Config
	switch v := get(EnvProfile); {
	case v == "":
	case isFalse(v):
		return nil, nil
	case isTrue(v):
		cfg = &Config{Enabled: true}
	case strings.HasPrefix(v, "{"):
		c, err := ParseConfig([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvProfile, err)
		}
		cfg = c
	default:
		c, err := ReadConfigFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q (want 1, 0, inline JSON or a JSON file): %w", EnvProfile, v, err)
		}
		cfg = c
	}
	others := []string{EnvProfileOps, EnvProfileVerbose, EnvProfileDebug, EnvProfileLayout, EnvTraceDir}
	if cfg == nil {
		for _, name := range others {
			if get(name) != "" {
				cfg = &Config{Enabled: true}
				break
			}
		}
		if cfg == nil {
			return nil, nil
		}
	}
	if v := get(EnvProfileOps); v != "" {
		cfg.Ops, cfg.OpsOnly = nil, true
		for _, op := range strings.Split(v, ",") {
			if op = strings.TrimSpace(op); op != "" {
				cfg.Ops = append(cfg.Ops, op)
			}
		}
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{EnvProfileVerbose, &cfg.Verbose}, {EnvProfileDebug, &cfg.Debug}} {
		switch v := get(b.name); {
		case v == "":
		case isTrue(v):
			*b.dst = true
		case isFalse(v):
			*b.dst = false
		default:
			return nil, fmt.Errorf("%w: %s=%q, want 1 or 0", ErrConfig, b.name, v)
		}
	}
	if v := get(EnvProfileLayout); v != "" {
		if err := cfg.Layout.Set(v); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvProfileLayout, err)
		}
	}
	if v := get(EnvTraceDir); v != "" {
		cfg.TraceDir = v
	}
	return cfg, cfg.Validate()
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "on", "yes":
		return true
	}
	return false
}

func isFalse(v string) bool {
	switch strings.ToLower(v) {
	case "0", "false", "off", "no":
		return true
	}
	return false
}
