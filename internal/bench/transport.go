package bench

import (
	"fmt"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/env"
)

// selectTransport adjusts the options of comm.Init (or NewLocalWorld) for
// transport t. It is the one place that knows how each transport is
// chosen: TransportAuto leaves Options.Transport.Kind zero, so that Init
// chooses as it does for any program (GOCOMM_TRANSPORT, else shared
// memory between ranks of one host and TCP between hosts); TransportSHM
// puts every peer on shared memory (Init fails when a peer is on another
// host), TransportTCP keeps ranks on one host off it, and TransportInproc
// needs nothing here.
func selectTransport(t Transport, opts *comm.Options) error {
	switch t {
	case TransportAuto:
		opts.Transport.Kind = comm.TransportAuto
	case TransportSHM:
		opts.Transport.Kind = comm.TransportSHM
	case TransportTCP:
		opts.Transport.Kind = comm.TransportTCP
	}
	return nil
}

// autoRoute is what the library's default transport chose for size ranks
// of the native backend on hosts hosts (comm.Comm.NodeCount; 0: unknown):
// "shm" when every rank is on one host, "tcp" when no two share one,
// "shm+tcp" in between, or the mode GOCOMM_TRANSPORT forced (mode as the
// ranks saw it; "" or "auto" is the default); "" when unknown or for one
// rank. A host whose ranks cannot map the shared segment falls back to
// TCP without a sign the public API shows, so "shm" is what was asked for
// there.
func autoRoute(mode string, hosts, size int) string {
	switch {
	case mode != "" && mode != "auto":
		return mode
	case hosts < 1 || size < 2:
		return ""
	case hosts == 1:
		return "shm"
	case hosts == size:
		return "tcp"
	}
	return "shm+tcp"
}

// describeTransport says, for the table header and the JSON, how ranks
// were connected: for TransportAuto on the native backend, what the
// library's default chose (see autoRoute); other transports and backends
// are their name.
func describeTransport(t Transport, backendName, mode string, hosts, size int) string {
	if t != TransportAuto || backendName != "native" {
		return t.String()
	}
	switch route := autoRoute(mode, hosts, size); {
	case mode != "" && mode != "auto":
		return "auto (" + transportEnv + "=" + mode + ")"
	case route == "shm":
		return "auto (the library's default: shared memory, every rank on this host)"
	case route == "tcp":
		return fmt.Sprintf("auto (the library's default: TCP, every rank on a host of its own, %d hosts)", hosts)
	case route == "shm+tcp":
		return fmt.Sprintf("auto (the library's default: shared memory within each of %d hosts, TCP between them)", hosts)
	}
	return "auto (the library's default: shared memory between ranks of one host, TCP between hosts)"
}

// seriesLabel is the default label of a run's results: backend/transport,
// and for TransportAuto on the native backend what it chose
// ("native/auto-shm").
func seriesLabel(t Transport, backendName, mode string, hosts, size int) string {
	label := backendName + "/" + t.String()
	if t == TransportAuto && backendName == "native" {
		if route := autoRoute(mode, hosts, size); route != "" {
			label += "-" + route
		}
	}
	return label
}

// transportEnv is the variable Init reads when Options.Transport.Kind is zero.
const transportEnv = env.EnvTransport
