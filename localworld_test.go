package comm_test

import (
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// localWorld is an in-process world of n ranks, closed when the test ends.
func localWorld(t *testing.T, n int) []*comm.Comm {
	t.Helper()
	return testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	})
}
