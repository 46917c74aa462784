package object_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/object"
)

// TestEveryCollectiveHasStartForm reads the package's source: every
// exported function whose first parameters are (ctx context.Context, c
// *comm.Comm) and that does not itself return a handle must have a Start
// form of the same name returning *Work[...], as the root package's
// collectives have theirs returning *comm.Work.
func TestEveryCollectiveHasStartForm(t *testing.T) {
	funcs := exportedFuncs(t, false)
	blocking := blockingCollectives(t, funcs)
	var missing []string
	for _, name := range blocking {
		start, ok := funcs["Start"+name]
		if !ok || !returnsHandle(start) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("collectives without a Start form returning *Work[...]: %v", missing)
	}
	t.Logf("%d blocking collectives: %v", len(blocking), blocking)
}

// TestEveryCollectiveHasExample: every blocking collective has an Example
// function of its name, so that go doc shows it in use.
func TestEveryCollectiveHasExample(t *testing.T) {
	blocking := blockingCollectives(t, exportedFuncs(t, false))
	examples := exportedFuncs(t, true)
	var missing []string
	for _, name := range blocking {
		if _, ok := examples["Example"+name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("collectives without an Example function: %v", missing)
	}
}

// exportedFuncs returns the package's exported top-level functions by
// name: of its test files when tests is set, else of the others.
func exportedFuncs(t *testing.T, tests bool) map[string]*ast.FuncDecl {
	t.Helper()
	funcs, err := testkit.ExportedFuncs(".", tests)
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// blockingCollectives returns, sorted, the names of funcs that are
// collectives in blocking form: not Start..., first parameters (ctx, c
// *comm.Comm), not returning a handle. It fails the test if the scan
// misses collectives it must see, since it would then prove nothing.
func blockingCollectives(t *testing.T, funcs map[string]*ast.FuncDecl) []string {
	t.Helper()
	var blocking []string
	for name, fd := range funcs {
		if !strings.HasPrefix(name, "Start") && isCollective(fd) && !returnsHandle(fd) {
			blocking = append(blocking, name)
		}
	}
	slices.Sort(blocking)
	want := []string{"AllGather", "AllReduce", "Broadcast", "Gather", "Reduce", "Scatter"}
	if !slices.Equal(blocking, want) {
		t.Fatalf("the scan found the collectives %v, want %v", blocking, want)
	}
	return blocking
}

// isCollective: the first two parameters are a context.Context and a
// *Comm.
func isCollective(fd *ast.FuncDecl) bool { return testkit.TakesCtxAndComm(fd) }

// returnsHandle: the only result is *Work[...].
func returnsHandle(fd *ast.FuncDecl) bool { return testkit.ReturnsPointerTo(fd, "Work") }

// TestStartForms runs the Start forms one at a time (each issues its
// collectives from its own goroutine) and checks their results.
func TestStartForms(t *testing.T) {
	const n = 3
	world := localWorld(t, n)
	errs := testkit.OnEveryRank(world, func(r int, c *comm.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		v := map[string]int{}
		if r == 1 {
			v = map[string]int{"from": 1}
		}
		got, err := object.StartBroadcast(ctx, c, &v, 1).Wait()
		if err != nil {
			return err
		}
		if v["from"] != 1 || got["from"] != 1 {
			return fmt.Errorf("StartBroadcast: got %v, Wait returned %v", v, got)
		}
		all, err := object.StartAllGather(ctx, c, "r"+string(rune('0'+r))).Wait()
		if err != nil {
			return err
		}
		if !slices.Equal(all, []string{"r0", "r1", "r2"}) {
			return errors.New("StartAllGather: got " + strings.Join(all, ","))
		}
		gw := object.StartGather(ctx, c, r*r, 2)
		if _, err := comm.WaitAny(ctx, nil, gw.Work()); err != nil {
			return err
		}
		gathered, err := gw.Wait()
		if err != nil {
			return err
		}
		if (r == 2 && !slices.Equal(gathered, []int{0, 1, 4})) || (r != 2 && gathered != nil) {
			return fmt.Errorf("StartGather: gathered %v", gathered)
		}
		mine, err := object.StartScatter(ctx, c, []string{"a", "b", "c"}, 0).Wait()
		if err != nil {
			return err
		}
		if mine != string(rune('a'+r)) {
			return errors.New("StartScatter: got " + mine)
		}
		return nil
	})
	testkit.NoErrors(t, errs)
}
