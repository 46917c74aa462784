package profile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name string
		json string
		want Config
	}{
		{"whole DeepSpeed config", `{"train_batch_size": 8, "fp16": {"enabled": true},
			"comms_logger": {"enabled": true, "verbose": false, "prof_all": false, "prof_ops": ["all_reduce", "grads"], "debug": true}}`,
			Config{Enabled: true, OpsOnly: true, Ops: []string{"all_reduce", "grads"}, Debug: true}},
		{"enabled false is honoured", `{"comms_logger": {"enabled": false, "prof_all": true}}`, Config{}},
		{"enabled defaults to false", `{"comms_logger": {"verbose": true}}`, Config{Verbose: true}},
		{"prof_all defaults to true", `{"comms_logger": {"enabled": true, "prof_ops": ["broadcast"]}}`,
			Config{Enabled: true, Ops: []string{"broadcast"}}},
		{"DeepSpeed config without the block", `{"train_batch_size": 8}`, Config{}},
		{"the block alone", `{"enabled": true, "verbose": true}`, Config{Enabled: true, Verbose: true}},
		{"gocomm keys", `{"enabled": true, "layout": "deepspeed", "trace_dir": "/tmp/t", "clock_sync": "always"}`,
			Config{Enabled: true, Layout: LayoutDeepSpeed, TraceDir: "/tmp/t", ClockSync: ClockSyncAlways}},
		{"nulls are defaults", `{"comms_logger": {"enabled": true, "prof_ops": null}}`, Config{Enabled: true}},
	}
	for _, c := range cases {
		got, err := ParseConfig([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, *got, c.want)
		}
	}
	for _, bad := range []string{
		`[1]`, `nope`, `null`, `{"comms_logger": 3}`, `{"comms_logger": {"enabld": true}}`,
		`{"enabled": "yes"}`, `{"enabled": true, "prof_ops": "all_reduce"}`, `{"enabled": true, "layout": "furlongs"}`,
		`{"enabled": true, "prof_ops": [""]}`, `{"enabled": true, "clock_sync": "sometimes"}`,
	} {
		if _, err := ParseConfig([]byte(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseConfig(%s) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ds_config.json")
	if err := os.WriteFile(file, []byte(`{"comms_logger": {"enabled": true, "prof_all": false, "prof_ops": ["all_gather_into_tensor"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		want *Config
	}{
		{"nothing", nil, nil},
		{"on", map[string]string{EnvProfile: "1"}, &Config{Enabled: true}},
		{"off wins", map[string]string{EnvProfile: "0", EnvTraceDir: "/x"}, nil},
		{"trace dir alone switches it on", map[string]string{EnvTraceDir: "/x"}, &Config{Enabled: true, TraceDir: "/x"}},
		{"file", map[string]string{EnvProfile: file}, &Config{Enabled: true, OpsOnly: true, Ops: []string{"all_gather_into_tensor"}}},
		{"inline", map[string]string{EnvProfile: `{"enabled": true, "verbose": true}`}, &Config{Enabled: true, Verbose: true}},
		{"knobs on top", map[string]string{EnvProfile: "on", EnvProfileOps: "all_reduce, grads", EnvProfileVerbose: "1",
			EnvProfileDebug: "true", EnvProfileLayout: "deepspeed"},
			&Config{Enabled: true, OpsOnly: true, Ops: []string{"all_reduce", "grads"}, Verbose: true, Debug: true, Layout: LayoutDeepSpeed}},
		{"file says off", map[string]string{EnvProfile: `{"enabled": false}`, EnvProfileVerbose: "1"}, &Config{Verbose: true}},
	}
	for _, c := range cases {
		got, err := FromEnv(func(k string) string { return c.env[k] })
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	for _, bad := range []map[string]string{
		{EnvProfile: filepath.Join(dir, "missing.json")},
		{EnvProfile: "{not json"},
		{EnvProfileVerbose: "maybe"},
		{EnvProfileLayout: "furlongs"},
	} {
		if _, err := FromEnv(func(k string) string { return bad[k] }); !errors.Is(err, ErrConfig) {
			t.Errorf("FromEnv(%v) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestSelected(t *testing.T) {
	all := NewLogger(Config{Enabled: true, Ops: []string{"broadcast"}}) // prof_all: true wins
	if !all.Selected(OpAllReduce, "") {
		t.Error("prof_all should select every op")
	}
	l := NewLogger(Config{Enabled: true, OpsOnly: true, Ops: []string{"all_reduce", "grads", "all_to_all_single", "isend"}})
	cases := []struct {
		op, name string
		want     bool
	}{
		{OpAllReduce, "", true},           // an op name, with no log name (DeepSpeed would not match)
		{OpAllReduce, "other", true},      // an op name, whatever the log name
		{OpBroadcast, "grads", true},      // a log name
		{OpBroadcast, "", false},          // neither
		{OpAllToAll, "", true},            // DeepSpeed's alias
		{OpAllToAllV, "", true},           // DeepSpeed's alias
		{OpSend, "", true},                // isend
		{OpRecv, "", false},               // irecv not listed
		{OpAllGather, "all_reduce", true}, // the log name matches
	}
	for _, c := range cases {
		if got := l.Selected(c.op, c.name); got != c.want {
			t.Errorf("Selected(%q, %q) = %v, want %v", c.op, c.name, got, c.want)
		}
	}
	if NewLogger(Config{Enabled: true, OpsOnly: true}).Selected(OpAllReduce, "") {
		t.Error("prof_all false with no prof_ops should select nothing")
	}
}

func TestLayoutAndClockSyncFlags(t *testing.T) {
	var l Layout
	for s, want := range map[string]Layout{"gbs": LayoutGBs, "GB/s": LayoutGBs, "deepspeed": LayoutDeepSpeed, "Gbps": LayoutDeepSpeed} {
		if err := l.Set(s); err != nil || l != want {
			t.Errorf("Layout.Set(%q) = %v, %v", s, l, err)
		}
		if l.String() != want.String() {
			t.Errorf("String: %v", l)
		}
	}
	var c ClockSync
	for s, want := range map[string]ClockSync{"auto": ClockSyncAuto, "always": ClockSyncAlways, "off": ClockSyncOff} {
		if err := c.Set(s); err != nil || c != want || c.String() != s {
			t.Errorf("ClockSync.Set(%q) = %v, %v", s, c, err)
		}
	}
	if err := (&Config{Layout: 7}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("Validate(layout 7) = %v", err)
	}
	if err := (*Config)(nil).Validate(); err != nil {
		t.Errorf("nil Validate = %v", err)
	}
}
