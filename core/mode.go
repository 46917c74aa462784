package core

import "fmt"

// TransportMode says how the native backend reaches its peers.
type TransportMode uint8

const (
	// TransportAuto: shared memory between ranks of one host, TCP between
	// hosts (the default).
	TransportAuto TransportMode = iota
	// TransportTCP: TCP to every peer.
	TransportTCP
	// TransportSHM: shared memory to every peer; every rank must be on
	// this host.
	TransportSHM
)

func (m TransportMode) String() string {
	switch m {
	case TransportAuto:
		return "auto"
	case TransportTCP:
		return "tcp"
	case TransportSHM:
		return "shm"
	}
	return fmt.Sprintf("TransportMode(%d)", uint8(m))
}

// ParseTransportMode reads "auto" (or ""), "tcp" or "shm".
func ParseTransportMode(s string) (TransportMode, error) {
	switch s {
	case "", "auto":
		return TransportAuto, nil
	case "tcp":
		return TransportTCP, nil
	case "shm":
		return TransportSHM, nil
	}
	return 0, fmt.Errorf("comm: unknown transport %q (want auto, tcp or shm)", s)
}
