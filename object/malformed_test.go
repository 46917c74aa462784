package object_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/object"
)

//lint:file-ignore SA1012 a nil context is one of the malformed calls tested
//lint:file-ignore U1000 the unexported field is what makes encoding/gob refuse the type

// Malformed calls of every exported function and method of the package,
// as the root package's malformed_test.go makes them of its own: each
// must return a comm:-prefixed error that wraps the sentinel naming the
// class of mistake and says what was wrong, promptly; none may panic or
// wait for a timeout. TestMalformedCallsCoverTheAPI fails when an exported
// function or method has no entry here.

// malformedDeadline bounds each call. An error caused by it counts as a
// hang: a malformed call must fail at once, not time out.
const malformedDeadline = 10 * time.Second

// receiverCall is a well-formed call of one API taking a *comm.Comm, made
// on c. TestMalformedReceivers applies the receiver variations (nil, zero,
// closed, non-member communicator, nil context) to it.
type receiverCall struct {
	call func(ctx context.Context, c *comm.Comm) error
}

// per is the communicator's size, at least 1, so that the well-formed
// calls below are well-formed on any communicator.
func per(c *comm.Comm) int { return max(c.Size(), 1) }

func addInts(a, b int) int { return a + b }

// receiverCalls holds every API that takes a *comm.Comm.
var receiverCalls = map[string]receiverCall{
	"Broadcast": {call: func(ctx context.Context, c *comm.Comm) error {
		v := "x"
		return object.Broadcast(ctx, c, &v, 0)
	}},
	"StartBroadcast": {call: func(ctx context.Context, c *comm.Comm) error {
		v := "x"
		_, err := object.StartBroadcast(ctx, c, &v, 0).Wait()
		return err
	}},
	"AllGather": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.AllGather(ctx, c, "x")
		return err
	}},
	"StartAllGather": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.StartAllGather(ctx, c, "x").Wait()
		return err
	}},
	"Gather": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.Gather(ctx, c, "x", 0)
		return err
	}},
	"StartGather": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.StartGather(ctx, c, "x", 0).Wait()
		return err
	}},
	"Scatter": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.Scatter(ctx, c, make([]string, per(c)), 0)
		return err
	}},
	"StartScatter": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.StartScatter(ctx, c, make([]string, per(c)), 0).Wait()
		return err
	}},
	"Reduce": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.Reduce(ctx, c, 1, addInts, 0)
		return err
	}},
	"StartReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.StartReduce(ctx, c, 1, addInts, 0).Wait()
		return err
	}},
	"AllReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.AllReduce(ctx, c, 1, addInts, object.Associative())
		return err
	}},
	"StartAllReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := object.StartAllReduce(ctx, c, 1, addInts).Wait()
		return err
	}},
}

// malformedCase is one malformed call. It runs on a world of two ranks:
// rank 0 makes the call with bad true; for a collective, rank 1 makes the
// matching well-formed call (bad false) at the same time and must fail
// promptly too, with any comm: error, instead of waiting for rank 0.
type malformedCase struct {
	api  string // as TestMalformedCallsCoverTheAPI names it
	what string
	// want is the sentinel rank 0's error must wrap, and says a
	// substring its message must contain (what to fix).
	want       error
	says       string
	collective bool
	// mismatch: the two ranks' calls are each well-formed but disagree;
	// the rank that sees it reports want, and the other may finish
	// first if it needed nothing more.
	mismatch bool
	call     func(ctx context.Context, c *comm.Comm, bad bool) error
}

// pick returns bad's value on the malformed rank and good's elsewhere.
func pick[T any](isBad bool, bad, good T) T {
	if isBad {
		return bad
	}
	return good
}

// unencodable has no exported field: encoding/gob refuses it.
type unencodable struct{ ch chan int }

var malformedCases = []malformedCase{
	{api: "Broadcast", what: "nil value pointer", want: comm.ErrInvalid, says: "v is nil", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			v := "x"
			return object.Broadcast(ctx, c, pick(bad, nil, &v), 0)
		}},
	{api: "Broadcast", what: "nil value pointer off the root", want: comm.ErrInvalid, says: "v is nil", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			v := "x"
			return object.Broadcast(ctx, c, pick(bad, nil, &v), 1)
		}},
	{api: "Broadcast", what: "an unencodable value", want: comm.ErrInvalid, says: "encod", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			v := unencodable{}
			return object.Broadcast(ctx, c, &v, 0)
		}},
	{api: "Broadcast", what: "negative root", want: comm.ErrInvalid, says: "root -1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			v := "x"
			return object.Broadcast(ctx, c, &v, pick(bad, -1, 0))
		}},
	{api: "StartBroadcast", what: "root out of range", want: comm.ErrInvalid, says: "root 2", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			v := "x"
			_, err := object.StartBroadcast(ctx, c, &v, pick(bad, 2, 0)).Wait()
			return err
		}},
	{api: "AllGather", what: "an unencodable value", want: comm.ErrInvalid, says: "encod", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.AllGather(ctx, c, pick[any](bad, func() {}, 1))
			return err
		}},
	{api: "StartAllGather", what: "an unencodable value", want: comm.ErrInvalid, says: "encod", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.StartAllGather(ctx, c, pick(bad, unencodable{}, unencodable{})).Wait()
			return err
		}},
	{api: "Gather", what: "root out of range", want: comm.ErrInvalid, says: "root 3", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.Gather(ctx, c, "x", pick(bad, 3, 0))
			return err
		}},
	{api: "StartGather", what: "an unencodable value", want: comm.ErrInvalid, says: "encod", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.StartGather(ctx, c, pick[any](bad, make(chan int), 1), 0).Wait()
			return err
		}},
	{api: "Scatter", what: "one value for two ranks", want: comm.ErrInvalid, says: "len(vs) = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.Scatter(ctx, c, make([]string, pick(bad, 1, 2)), 0)
			return err
		}},
	{api: "Scatter", what: "negative root", want: comm.ErrInvalid, says: "root -1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.Scatter(ctx, c, make([]string, 2), pick(bad, -1, 0))
			return err
		}},
	{api: "StartScatter", what: "an unencodable value", want: comm.ErrInvalid, says: "encod", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.StartScatter(ctx, c, []any{1, pick[any](bad, func() {}, 2)}, 0).Wait()
			return err
		}},
	{api: "Reduce", what: "nil function", want: comm.ErrInvalid, says: "function is nil", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.Reduce(ctx, c, 1, pick(bad, nil, addInts), 0)
			return err
		}},
	{api: "Reduce", what: "root out of range", want: comm.ErrInvalid, says: "root 8", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.Reduce(ctx, c, 1, addInts, pick(bad, 8, 0))
			return err
		}},
	{api: "Reduce", what: "roots that differ across ranks", mismatch: true, want: comm.ErrInvalid, says: "another root", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.Reduce(ctx, c, 1, addInts, pick(bad, 1, 0))
			return err
		}},
	{api: "StartReduce", what: "an unencodable value", want: comm.ErrInvalid, says: "encod", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.StartReduce(ctx, c, pick[any](bad, func() {}, 1), func(a, b any) any { return a }, 0).Wait()
			return err
		}},
	{api: "AllReduce", what: "nil function", want: comm.ErrInvalid, says: "function is nil", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.AllReduce(ctx, c, 1, pick(bad, nil, addInts), object.Associative())
			return err
		}},
	{api: "StartAllReduce", what: "nil function and a nil option", want: comm.ErrInvalid, says: "function is nil", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := object.StartAllReduce(ctx, c, 1, pick(bad, nil, addInts), nil).Wait()
			return err
		}},
	{api: "Work.Wait", what: "a nil and a zero Work", want: comm.ErrInvalid, says: "nil *object.Work",
		call: func(context.Context, *comm.Comm, bool) error {
			if _, err := new(object.Work[int]).Wait(); !errors.Is(err, comm.ErrInvalid) {
				return fmt.Errorf("zero Work: %v, want ErrInvalid", err)
			}
			_, err := (*object.Work[int])(nil).Wait()
			return err
		}},
	{api: "Work.Done", what: "a nil and a zero Work", want: comm.ErrInvalid, says: "nil *Work",
		call: func(context.Context, *comm.Comm, bool) error {
			<-(*object.Work[int])(nil).Done()
			<-new(object.Work[int]).Done()
			return (*object.Work[int])(nil).Work().Err()
		}},
	{api: "Work.Work", what: "a zero Work", want: comm.ErrInvalid, says: "Work",
		call: func(context.Context, *comm.Comm, bool) error { return new(object.Work[int]).Work().Wait() }},
}

// malformedAllowed are the exported functions and methods with no
// malformed call: each takes nothing a caller could get wrong.
var malformedAllowed = map[string]string{
	"Associative":  "no arguments",
	"Stage.String": "total: unknown stages print as Stage(n)",
	"Error.Error":  "method of an error value the package makes, never nil",
	"Error.Unwrap": "method of an error value the package makes, never nil",
}

// TestMalformedCallsCoverTheAPI fails when an exported function or method
// of the package has no malformed call, or when an entry names none.
func TestMalformedCallsCoverTheAPI(t *testing.T) {
	api, err := testkit.ExportedAPI(".")
	if err != nil {
		t.Fatal(err)
	}
	cased := map[string]bool{}
	for _, mc := range malformedCases {
		cased[mc.api] = true
	}
	var missing, stale []string
	for name, shape := range api {
		_, recv := receiverCalls[name]
		switch {
		case shape.Comm && !recv:
			missing = append(missing, name+" (takes a *comm.Comm: needs a receiverCalls entry)")
		case !shape.Comm && !cased[name] && malformedAllowed[name] == "":
			missing = append(missing, name+" (needs a malformedCases entry, or a reason in malformedAllowed)")
		}
	}
	for name := range receiverCalls {
		if _, ok := api[name]; !ok {
			stale = append(stale, "receiverCalls "+name)
		}
	}
	for name := range cased {
		if _, ok := api[name]; !ok {
			stale = append(stale, "malformedCases "+name)
		}
	}
	for name := range malformedAllowed {
		if _, ok := api[name]; !ok {
			stale = append(stale, "malformedAllowed "+name)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	if len(missing) > 0 {
		t.Errorf("exported API without malformed calls:\n\t%s", strings.Join(missing, "\n\t"))
	}
	if len(stale) > 0 {
		t.Errorf("entries naming no exported function or method: %v", stale)
	}
	if len(api) < 16 {
		t.Fatalf("the scan found only %d exported functions and methods; it must be missing files", len(api))
	}
}

func malformedWorld(t *testing.T, n int) []*comm.Comm {
	t.Helper()
	world, err := comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(world) })
	return world
}

// TestMalformedCalls runs every malformedCase on a fresh in-process world
// of two ranks: rank 0 makes the malformed call; for a collective rank 1
// makes the well-formed one at the same time, and both must fail promptly.
func TestMalformedCalls(t *testing.T) {
	for _, mc := range malformedCases {
		t.Run(mc.api+"/"+mc.what, func(t *testing.T) {
			world := malformedWorld(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), malformedDeadline)
			defer cancel()
			peer := make(chan error, 1)
			if mc.collective {
				go func() {
					problem, err := testkit.MalformedOutcome(malformedDeadline, func() error { return mc.call(ctx, world[1], false) })
					if problem != "" {
						err = errors.New(problem)
					}
					peer <- err
				}()
			} else {
				peer <- nil
			}
			problem, err := testkit.MalformedOutcome(malformedDeadline, func() error { return mc.call(ctx, world[0], true) })
			if problem != "" {
				t.Fatalf("rank 0: %s", problem)
			}
			perr := <-peer
			switch {
			case mc.mismatch:
				p0, p1 := testkit.CheckMalformedError(err, mc.want, mc.says), testkit.CheckMalformedError(perr, mc.want, mc.says)
				if p0 != "" && p1 != "" {
					t.Errorf("neither rank reported the disagreement:\n\trank 0: %s\n\trank 1: %s", p0, p1)
				}
				for r, e := range []error{err, perr} {
					if e != nil && !strings.HasPrefix(e.Error(), "comm:") {
						t.Errorf("rank %d: error not comm:-prefixed: %v", r, e)
					}
				}
			default:
				if p := testkit.CheckMalformedError(err, mc.want, mc.says); p != "" {
					t.Errorf("rank 0: %s", p)
				}
				if mc.collective {
					checkPeerOfMalformed(ctx, t, world[1], perr)
				} else if perr != nil {
					t.Errorf("rank 1: %v", perr)
				}
			}
			t.Logf("rank 0: %v; rank 1: %v", err, perr)
		})
	}
}

// checkPeerOfMalformed checks the well-formed rank of a collective that
// rank 0 called malformed: it must have failed with a comm: error or,
// when it needed nothing from rank 0 and finished first, found the world
// aborted by rank 0 at its next collective.
func checkPeerOfMalformed(ctx context.Context, t *testing.T, c *comm.Comm, perr error) {
	t.Helper()
	if perr != nil {
		if p := testkit.CheckMalformedError(perr, nil, ""); p != "" {
			t.Errorf("rank 1 (well-formed call): %s", p)
		}
		return
	}
	err := comm.Barrier(ctx, c)
	if !errors.Is(err, comm.ErrAborted) || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("rank 1 (well-formed call) succeeded, and its next collective did not find the world aborted by rank 0: %v", err)
	}
}

// receiverVariants are communicators (or a context) no call can use, with
// the sentinel and words each must fail with.
var receiverVariants = []struct {
	name   string
	get    func(t *testing.T) *comm.Comm
	nilCtx bool
	want   error
	says   string
}{
	{name: "nil Comm", get: func(*testing.T) *comm.Comm { return nil }, want: comm.ErrInvalid, says: "nil *Comm"},
	{name: "zero Comm", get: func(*testing.T) *comm.Comm { return new(comm.Comm) }, want: comm.ErrInvalid, says: "zero Comm"},
	{name: "closed Comm", want: comm.ErrClosed,
		get: func(t *testing.T) *comm.Comm {
			world := malformedWorld(t, 2)
			closeAll(world)
			return world[0]
		}},
	{name: "non-member Comm", want: comm.ErrNotMember,
		get: func(t *testing.T) *comm.Comm {
			world := malformedWorld(t, 2)
			done := make(chan error, 1)
			go func() { _, err := world[0].NewGroup(context.Background(), []int{0}); done <- err }()
			g, err := world[1].NewGroup(context.Background(), []int{0})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return g
		}},
	{name: "nil context", nilCtx: true, want: comm.ErrInvalid, says: "nil context",
		get: func(t *testing.T) *comm.Comm { return malformedWorld(t, 2)[0] }},
}

// TestMalformedReceivers calls every API that takes a *comm.Comm with a
// nil and a zero communicator, a closed one, a non-member's and a nil
// context.
func TestMalformedReceivers(t *testing.T) {
	names := make([]string, 0, len(receiverCalls))
	for name := range receiverCalls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, v := range receiverVariants {
		for _, name := range names {
			rc := receiverCalls[name]
			t.Run(v.name+"/"+name, func(t *testing.T) {
				c := v.get(t)
				ctx, cancel := context.WithTimeout(context.Background(), malformedDeadline)
				defer cancel()
				if v.nilCtx {
					ctx = nil
				}
				problem, err := testkit.MalformedOutcome(malformedDeadline, func() error { return rc.call(ctx, c) })
				if problem != "" {
					t.Fatal(problem)
				}
				if p := testkit.CheckMalformedError(err, v.want, v.says); p != "" {
					t.Error(p)
				}
			})
		}
	}
}
