package comm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/backend/native"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/profile"
)

// TestForceAlgorithmWithRootNames: comm.Algorithms and comm.Ring & co.
// force the schedule (the profile names the one that ran) with nothing
// but the root package's names.
func TestForceAlgorithmWithRootNames(t *testing.T) {
	if !comm.ProfileCompiledIn {
		t.Skip("built with -tags gocomm_noprofile: no record names the algorithm")
	}
	for _, a := range []comm.Algorithm{comm.Ring, comm.Linear, comm.Tree, comm.RecursiveDoubling} {
		t.Run(a.String(), func(t *testing.T) {
			world := testkit.World(t, func() ([]*comm.Comm, error) {
				return comm.NewLocalWorld(4, comm.Options{Timeout: time.Minute,
					Algorithms: comm.Algorithms{AllReduce: a}, Profile: &profile.Config{Enabled: true}})
			})
			testkit.NoErrors(t, testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
				buf := make([]float64, 1000)
				for i := range buf {
					buf[i] = float64(r)
				}
				if err := comm.AllReduce(context.Background(), c, buf, buf, comm.Sum); err != nil {
					return err
				}
				if buf[0] != 6 || buf[999] != 6 {
					return fmt.Errorf("sum %v, want 6", buf[0])
				}
				recs := c.Profiler().Records()
				if len(recs) != 1 || recs[0].Algorithm != a.String() {
					return fmt.Errorf("records %+v, want one all-reduce by %v", recs, a)
				}
				return nil
			}))
		})
	}
}

// countingDriver is the native driver, counting the in-process worlds it
// opens.
type countingDriver struct {
	native.Driver
	opened *atomic.Int32
}

func (d countingDriver) OpenLocal(size int, cfg backend.Config) ([]backend.Comm, error) {
	d.opened.Add(1)
	return d.Driver.OpenLocal(size, cfg)
}

// openOnly is a driver that cannot open a world inside one process.
type openOnly struct{}

func (openOnly) Open(context.Context, backend.Config) (backend.Comm, error) {
	return nil, errors.New("not used")
}

var localOpened atomic.Int32

func init() {
	backend.Register("native-counting-local", countingDriver{opened: &localOpened})
	backend.Register("open-only", openOnly{})
}

// TestNewLocalWorldThroughRegistry: NewLocalWorld opens its world through
// the driver Options.Backend names (a backend.LocalOpener), and says so
// when the driver cannot.
func TestNewLocalWorldThroughRegistry(t *testing.T) {
	before := localOpened.Load()
	world := testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(3, comm.Options{Backend: "native-counting-local", Timeout: time.Minute})
	})
	if got := localOpened.Load() - before; got != 1 {
		t.Errorf("the driver opened %d worlds, want 1", got)
	}
	testkit.NoErrors(t, testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
		if c.Backend() != "native-counting-local" || c.Rank() != r || c.Size() != 3 {
			return fmt.Errorf("backend %q, rank %d of %d", c.Backend(), c.Rank(), c.Size())
		}
		buf := []int32{int32(r)}
		if err := comm.AllReduce(context.Background(), c, buf, buf, comm.Sum); err != nil || buf[0] != 3 {
			return fmt.Errorf("all-reduce %v, %v", buf, err)
		}
		return nil
	}))
	for name, want := range map[string]string{"open-only": "no backend.LocalOpener", "no-such-driver": "unknown backend"} {
		if w, err := comm.NewLocalWorld(2, comm.Options{Backend: name}); err == nil || !strings.Contains(err.Error(), want) {
			testkit.CloseAll(w)
			t.Errorf("NewLocalWorld with %s: %v, want an error saying %q", name, err, want)
		}
	}
	// The default is the native driver.
	world = testkit.World(t, func() ([]*comm.Comm, error) { return comm.NewLocalWorld(1, comm.Options{}) })
	if world[0].Backend() != "native" {
		t.Errorf("default backend %q, want native", world[0].Backend())
	}
}
