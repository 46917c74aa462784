package bench

import "github.com/gocomm/comm"

// selectTransport adjusts the options of comm.Init (or NewLocalWorld) for
// transport t. It is the one place that knows how each transport is
// chosen: when gocomm grows its shared-memory path (issue 4, item 1),
// TransportSHM sets it here, and TransportTCP keeps ranks on one host off
// it.
func selectTransport(t Transport, opts *comm.Options) error {
	switch t {
	case TransportSHM:
		return ErrNoSHM
	}
	return nil
}
