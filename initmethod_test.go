package comm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/env"
)

// TestOptionsInitMethod: Options.InitMethod chooses the meeting place
// over GOCOMM_INIT_METHOD and MASTER_ADDR/MASTER_PORT; MasterAddr/Port and
// Store still win over it; "env://" leaves the choice to the environment;
// a bad value is an error naming the field.
func TestOptionsInitMethod(t *testing.T) {
	envVars := envOf("GOCOMM_INIT_METHOD=tcp://env-host:1111", "MASTER_ADDR=m", "MASTER_PORT=2222")
	tests := []struct {
		name     string
		opts     Options
		kind     Rendezvous
		wantFrom string
	}{
		{"tcp", Options{InitMethod: "tcp://opt-host:3333"}, Rendezvous{Kind: RendezvousTCP, Addr: "opt-host:3333"}, "Options.InitMethod"},
		{"file", Options{InitMethod: "file:///shared/job.store"}, Rendezvous{Kind: RendezvousFile, Path: "/shared/job.store"}, "Options.InitMethod"},
		{"env:// is the environment's choice", Options{InitMethod: "env://"}, Rendezvous{Kind: RendezvousTCP, Addr: "env-host:1111"}, env.EnvInitMethod},
		{"etcd", Options{InitMethod: "etcd://e1:2379,e2:2379/jobs/9"}, Rendezvous{Kind: RendezvousEtcd, Addr: "e1:2379,e2:2379"}, "Options.InitMethod"},
		{"MasterAddr wins", Options{InitMethod: "tcp://opt-host:3333", MasterAddr: "ma", MasterPort: 4444}, Rendezvous{Kind: RendezvousTCP, Addr: "ma:4444"}, "Options.MasterAddr/MasterPort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Rank, o.Size, o.Getenv = 1, 2, envVars
			cfg, err := resolve(o)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.rdzv.Kind != tt.kind.Kind || cfg.rdzv.Addr != tt.kind.Addr || cfg.rdzv.Path != tt.kind.Path || cfg.rdzv.From != tt.wantFrom {
				t.Fatalf("rendezvous %+v, want %+v from %s", cfg.rdzv, tt.kind, tt.wantFrom)
			}
		})
	}
	// Without any variable, InitMethod alone is enough for a world of 2.
	cfg, err := resolve(Options{Rank: 0, Size: 2, InitMethod: "tcp://10.0.0.1:29500", Getenv: envOf()})
	if err != nil || cfg.rdzv.Kind != RendezvousTCP || cfg.rdzv.Addr != "10.0.0.1:29500" {
		t.Fatalf("InitMethod alone: %+v, %v", cfg.rdzv, err)
	}
	for _, bad := range []string{"tcp://nohostport", "file://relative/path", "http://x:1", "::", "etcd://e1:2379", "etcd://e1/job"} {
		_, err := resolve(Options{Rank: 0, Size: 2, InitMethod: bad, Getenv: envOf()})
		if !errors.Is(err, env.ErrEnvironment) || !strings.Contains(err.Error(), "Options.InitMethod") || !strings.Contains(err.Error(), bad) {
			t.Errorf("InitMethod %q: error %v, want one naming Options.InitMethod and the value", bad, err)
		}
		if strings.Contains(err.Error(), env.EnvInitMethod) {
			t.Errorf("InitMethod %q: error %v names the variable, not the option", bad, err)
		}
	}
	// An etcd prefix and TTL reach the store's options.
	cfg, err = resolve(Options{Rank: 1, Size: 3, InitMethod: "etcd://127.0.0.1:2379/j?ttl=4s", Getenv: envOf()})
	if err != nil || cfg.rdzv.Prefix != "/j" || cfg.rdzv.LeaseTTL != 4*time.Second || len(cfg.rdzv.Endpoints) != 1 {
		t.Fatalf("etcd InitMethod: %+v, %v", cfg.rdzv, err)
	}
}
