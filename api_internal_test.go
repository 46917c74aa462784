package comm

import (
	"errors"
	"strings"
	"testing"

	"github.com/gocomm/comm/core"
)

// TestResolveTransportOptions: each field of Options.Transport beats the
// variable it mirrors, and a zero field takes it.
func TestResolveTransportOptions(t *testing.T) {
	all := envOf("GOCOMM_TRANSPORT=tcp", "GOCOMM_HOST_ID=env-host", "GOCOMM_SOCKET_HOST=10.0.0.9",
		"GOCOMM_SOCKET_IFNAME=eth", "GOCOMM_TCP_CONGESTION=system", "GOCOMM_SHM_STORES=cached", "GOCOMM_SHM_SINGLE_COPY=4096")
	cfg, err := resolve(Options{Getenv: all})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.transport.Mode != core.TransportTCP || cfg.transport.HostID != "env-host" || cfg.listenHost != "10.0.0.9" ||
		cfg.socketIfname != "eth" || cfg.transport.TCPCongestion != "system" || cfg.transport.SHMStores != "cached" ||
		cfg.transport.SingleCopyBytes != 4096 {
		t.Errorf("from the environment: %+v, listen %q, ifname %q", cfg.transport, cfg.listenHost, cfg.socketIfname)
	}
	cfg, err = resolve(Options{Getenv: all, Transport: TransportOptions{Kind: TransportSHM, HostID: "opt-host",
		ListenHost: "127.0.0.1", SocketIfname: "=lo", TCPCongestion: "reno", SHMStores: "bypass", SingleCopyBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.transport.Mode != core.TransportSHM || cfg.transport.HostID != "opt-host" || cfg.listenHost != "127.0.0.1" ||
		cfg.socketIfname != "=lo" || cfg.transport.TCPCongestion != "reno" || cfg.transport.SHMStores != "bypass" ||
		cfg.transport.SingleCopyBytes != -1 {
		t.Errorf("from Options: %+v, listen %q, ifname %q", cfg.transport, cfg.listenHost, cfg.socketIfname)
	}
	// TransportAuto (zero) lets GOCOMM_TRANSPORT choose; "auto" set
	// explicitly does not.
	for _, tt := range []struct {
		kind TransportKind
		env  string
		want core.TransportMode
	}{
		{TransportAuto, "", core.TransportAuto}, {TransportAuto, "GOCOMM_TRANSPORT=shm", core.TransportSHM},
		{"auto", "GOCOMM_TRANSPORT=tcp", core.TransportAuto}, {TransportTCP, "GOCOMM_TRANSPORT=shm", core.TransportTCP},
	} {
		cfg, err := resolve(Options{Transport: TransportOptions{Kind: tt.kind}, Getenv: envOf(tt.env)})
		if err != nil || cfg.transport.Mode != tt.want {
			t.Errorf("Kind %q with %q: %v, %v; want %v", tt.kind, tt.env, cfg.transport.Mode, err, tt.want)
		}
	}
	_, err = resolve(Options{Transport: TransportOptions{Kind: "udp"}, Getenv: envOf()})
	if !errors.Is(err, ErrEnvironment) || !strings.Contains(err.Error(), "Options.Transport.Kind") {
		t.Errorf("Kind udp: %v, want an ErrEnvironment naming Options.Transport.Kind", err)
	}
	if TransportAuto.String() != "auto" || TransportTCP.String() != "tcp" || TransportSHM.String() != "shm" {
		t.Errorf("String: %v %v %v", TransportAuto, TransportTCP, TransportSHM)
	}
}

// TestResolveAlgorithms: Options.Algorithms, in the root package's names,
// beats GOCOMM_ALGO_<OP> field by field.
func TestResolveAlgorithms(t *testing.T) {
	cfg, err := resolve(Options{Algorithms: Algorithms{AllReduce: Ring},
		Getenv: envOf("GOCOMM_ALGO_ALLREDUCE=tree", "GOCOMM_ALGO_BROADCAST=linear", "GOCOMM_ALGO_ALLTOALL=pairwise")})
	if err != nil {
		t.Fatal(err)
	}
	want := Algorithms{AllReduce: Ring, Broadcast: Linear, AllToAll: Pairwise}
	if cfg.algorithms != want {
		t.Errorf("algorithms %+v, want %+v", cfg.algorithms, want)
	}
	if got := want.For(core.KindAllToAllV); got != Pairwise {
		t.Errorf("For(AllToAllV) = %v, want pairwise (the base kind's)", got)
	}
}
