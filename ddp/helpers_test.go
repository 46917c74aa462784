package ddp_test

import (
	"testing"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/commtest"
	"github.com/gocomm/comm/internal/testkit"
)

// onEveryWorld runs f as a subtest on a world of n ranks over every data
// path (package commtest: inproc, tcp, shm, hybrid).
func onEveryWorld(t *testing.T, n int, f func(t *testing.T, w []*comm.Comm)) {
	commtest.OnEach(t, n, comm.Options{}, f)
}

// onEveryRank runs f on every rank of w at once and returns their errors.
func onEveryRank(w []*comm.Comm, f func(rank int, c *comm.Comm) error) []error {
	return testkit.OnEveryRank(w, f)
}
