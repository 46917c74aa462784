package bench

import "github.com/gocomm/comm"

// selectTransport adjusts the options of comm.Init (or NewLocalWorld) for
// transport t. It is the one place that knows how each transport is
// chosen: TransportSHM puts every peer on shared memory (Init fails when a
// peer is on another host), TransportTCP keeps ranks on one host off it,
// and TransportInproc needs nothing here.
func selectTransport(t Transport, opts *comm.Options) error {
	switch t {
	case TransportSHM:
		opts.Transport = "shm"
	case TransportTCP:
		opts.Transport = "tcp"
	}
	return nil
}
