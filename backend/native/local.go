package native

import (
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/internal/transport"
)

var _ backend.LocalOpener = Driver{}

// OpenLocal returns a world of size ranks inside this process, connected
// by in-memory channels (transport.Inproc).
func (Driver) OpenLocal(size int, cfg backend.Config) ([]backend.Comm, error) {
	eps := transport.NewInprocWorld(size, transport.InprocOptions{})
	world := make([]backend.Comm, len(eps))
	for i, ep := range eps {
		c := cfg
		c.Rank, c.Size = i, size
		world[i] = NewWorld(ep, c)
	}
	return world, nil
}
