package object_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/commtest"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/object"
)

// onRanks runs body on every rank of world at once and returns the results
// and errors by rank.
func onRanks[T any](world []*comm.Comm, body func(ctx context.Context, c *comm.Comm) (T, error)) ([]T, []error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make([]T, len(world))
	errs := make([]error, len(world))
	var wg sync.WaitGroup
	for i, c := range world {
		wg.Add(1)
		go func() { defer wg.Done(); res[i], errs[i] = body(ctx, c) }()
	}
	wg.Wait()
	return res, errs
}

func localWorld(t *testing.T, n int) []*comm.Comm {
	t.Helper()
	return testkit.World(t, func() ([]*comm.Comm, error) {
		return comm.NewLocalWorld(n, comm.Options{Timeout: time.Minute})
	})
}

// schedules are the two ways to reduce: rank order, and recursive doubling.
var schedules = []struct {
	name string
	opts []object.ReduceOption
}{{"rank order", nil}, {"associative", []object.ReduceOption{object.Associative()}}}

// reduceEverywhere runs Reduce (root = size-1) or AllReduce on
// every rank and checks the outcome: want on the root (every rank for the
// all-reduce), the zero value on the others, identical everywhere.
func reduceEverywhere[T any](t *testing.T, world []*comm.Comm, all bool, values func(rank int) T, f func(a, b T) T, want T, opts ...object.ReduceOption) {
	t.Helper()
	root := len(world) - 1
	res, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (T, error) {
		if all {
			return object.AllReduce(ctx, c, values(c.Rank()), f, opts...)
		}
		return object.Reduce(ctx, c, values(c.Rank()), f, root, opts...)
	})
	var zero T
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		switch {
		case all || r == root:
			if !reflect.DeepEqual(res[r], want) {
				t.Fatalf("rank %d: %#v, want %#v", r, res[r], want)
			}
		case !reflect.DeepEqual(res[r], zero):
			t.Fatalf("rank %d (not root): %#v, want the zero value", r, res[r])
		}
	}
}

type stats struct {
	Count   int
	Loss    float64
	MaxLoss float64
	Worst   string
	Counts  map[string]int
}

func mergeStats(a, b stats) stats {
	out := stats{Count: a.Count + b.Count, Loss: a.Loss + b.Loss, MaxLoss: a.MaxLoss, Worst: a.Worst, Counts: map[string]int{}}
	if b.MaxLoss > a.MaxLoss {
		out.MaxLoss, out.Worst = b.MaxLoss, b.Worst
	}
	for k, v := range a.Counts {
		out.Counts[k] += v
	}
	for k, v := range b.Counts {
		out.Counts[k] += v
	}
	return out
}

func TestReduceValues(t *testing.T) {
	concat := func(a, b string) string { return a + b }
	for n := 1; n <= 5; n++ {
		world := localWorld(t, n)
		for _, s := range schedules {
			for _, all := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d ranks/%s/all=%v", n, s.name, all), func(t *testing.T) {
					// Strings: concatenation is not commutative.
					var want strings.Builder
					for r := range n {
						fmt.Fprintf(&want, "r%d;", r)
					}
					reduceEverywhere(t, world, all, func(r int) string { return fmt.Sprintf("r%d;", r) }, concat, want.String(), s.opts...)

					// Slices, appended in rank order.
					var wantSlice []int
					for r := range n {
						wantSlice = append(wantSlice, r, 10*r)
					}
					reduceEverywhere(t, world, all, func(r int) []int { return []int{r, 10 * r} },
						func(a, b []int) []int { return append(slices.Clip(a), b...) }, wantSlice, s.opts...)

					// Maps, merged.
					wantMap := map[string]int{"common": n}
					for r := range n {
						wantMap[fmt.Sprintf("rank%d", r)] = r + 1
					}
					reduceEverywhere(t, world, all, func(r int) map[string]int { return map[string]int{"common": 1, fmt.Sprintf("rank%d", r): r + 1} },
						func(a, b map[string]int) map[string]int {
							out := maps.Clone(a)
							for k, v := range b {
								out[k] += v
							}
							return out
						}, wantMap, s.opts...)

					// Structs holding a map.
					wantStats := stats{Count: 0, Counts: map[string]int{}}
					for r := range n {
						wantStats.Count += r + 1
						wantStats.Loss += float64(r) / 4
						wantStats.Counts["batches"] += 2
					}
					wantStats.MaxLoss, wantStats.Worst = float64(n-1)/4, fmt.Sprintf("rank%d", n-1)
					reduceEverywhere(t, world, all, func(r int) stats {
						return stats{Count: r + 1, Loss: float64(r) / 4, MaxLoss: float64(r) / 4, Worst: fmt.Sprintf("rank%d", r), Counts: map[string]int{"batches": 2}}
					}, mergeStats, wantStats, s.opts...)
				})
			}
		}
	}
}

// The default schedule is a left fold in rank order, for any f: a
// non-associative f shows the bracketing. With Associative, the bracketing
// is the recursive-doubling tree's, still in rank order and identical on
// every rank.
func TestReduceBracketing(t *testing.T) {
	bracket := func(a, b string) string { return "(" + a + " " + b + ")" }
	name := func(r int) string { return fmt.Sprint(r) }
	world := localWorld(t, 5)
	reduceEverywhere(t, world, true, name, bracket, "((((0 1) 2) 3) 4)")
	reduceEverywhere(t, world, false, name, bracket, "((((0 1) 2) 3) 4)")
	// 5 ranks: 1 hands its value to 0; then 0 (with 0-1), 2, 3, 4 double.
	reduceEverywhere(t, world, true, name, bracket, "(((0 1) 2) (3 4))", object.Associative())
	world4 := localWorld(t, 4)
	reduceEverywhere(t, world4, true, name, bracket, "((0 1) (2 3))", object.Associative())
}

// On groups: concurrently on the two halves of a Split, and on a NewGroup
// whose order differs from the world's.
func TestReduceOnGroups(t *testing.T) {
	world := localWorld(t, 5)
	concat := func(a, b string) string { return a + b }
	for _, s := range schedules {
		t.Run(s.name, func(t *testing.T) {
			res, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (string, error) {
				g, err := c.Split(ctx, c.Rank()%2, -c.Rank()) // descending ranks
				if err != nil {
					return "", err
				}
				defer g.Close()
				return object.AllReduce(ctx, g, fmt.Sprintf("w%d;", c.Rank()), concat, s.opts...)
			})
			for r, err := range errs {
				want := map[int]string{0: "w4;w2;w0;", 1: "w3;w1;"}[r%2]
				if err != nil || res[r] != want {
					t.Fatalf("rank %d: %q, %v; want %q", r, res[r], err, want)
				}
			}
			res, errs = onRanks(world, func(ctx context.Context, c *comm.Comm) (string, error) {
				g, err := c.NewGroup(ctx, []int{4, 1, 3})
				if err != nil {
					return "", err
				}
				defer g.Close()
				if g.Rank() < 0 {
					_, err := object.Reduce(ctx, g, "", concat, 0, s.opts...)
					if !errors.Is(err, comm.ErrNotMember) {
						return "", fmt.Errorf("non-member: %v, want ErrNotMember", err)
					}
					return "", nil
				}
				return object.Reduce(ctx, g, fmt.Sprintf("w%d;", c.Rank()), concat, 2, s.opts...) // root: world rank 3
			})
			for r, err := range errs {
				want := map[int]string{3: "w4;w1;w3;"}[r]
				if err != nil || res[r] != want {
					t.Fatalf("rank %d: %q, %v; want %q", r, res[r], err, want)
				}
			}
		})
	}
}

func TestStartReduce(t *testing.T) {
	world := localWorld(t, 3)
	sum := func(a, b map[string]int) map[string]int {
		out := maps.Clone(a)
		for k, v := range b {
			out[k] += v
		}
		return out
	}
	for _, s := range schedules {
		res, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) ([]map[string]int, error) {
			w1 := object.StartAllReduce(ctx, c, map[string]int{"n": 1}, sum, s.opts...)
			<-w1.Done()
			a, err := w1.Wait()
			if err != nil {
				return nil, err
			}
			w2 := object.StartReduce(ctx, c, map[string]int{"r": c.Rank()}, sum, 1, s.opts...)
			if err := w2.Work().Wait(); err != nil {
				return nil, err
			}
			b, err := w2.Wait()
			return []map[string]int{a, b}, err
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%s: rank %d: %v", s.name, r, err)
			}
			var wantB map[string]int
			if r == 1 {
				wantB = map[string]int{"r": 3}
			}
			if got := res[r]; !reflect.DeepEqual(got[0], map[string]int{"n": 3}) || !reflect.DeepEqual(got[1], wantB) {
				t.Fatalf("%s: rank %d: %v, want [map[n:3] %v]", s.name, r, got, wantB)
			}
		}
	}
}

// picky fails to decode when X is 13.
type picky struct{ X int }

func (p picky) GobEncode() ([]byte, error) { return []byte{byte(p.X)}, nil }

func (p *picky) GobDecode(b []byte) error {
	if len(b) != 1 || b[0] == 13 {
		return errors.New("picky: unlucky value")
	}
	p.X = int(b[0])
	return nil
}

type unregistered struct{ A int }

// Failures on one rank fail the call on every rank, at once (the
// communicator's timeout is a minute), naming the same rank, stage and
// reason everywhere.
func TestReduceFailsEveryRank(t *testing.T) {
	type outcome struct {
		stage  object.Stage
		rank   int // -1: any single rank, the same on all
		reason string
		local  error // errors.Is target on every rank
	}
	cases := []struct {
		name string
		run  func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error
		want outcome
	}{
		{"encode", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			v := []any{c.Rank()}
			if c.Rank() == 2 {
				v = []any{unregistered{1}}
			}
			_, err := object.AllReduce(ctx, c, v, func(a, b []any) []any { return append(a, b...) }, opts...)
			return err
		}, outcome{object.StageEncode, 2, "not registered", comm.ErrInvalid}},
		{"nil function", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			f := func(a, b int) int { return a + b }
			if c.Rank() == 3 {
				f = nil
			}
			_, err := object.Reduce(ctx, c, 1, f, 0, opts...)
			return err
		}, outcome{object.StageArgument, 3, "nil", comm.ErrInvalid}},
		{"root out of range on one rank", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			root := 0
			if c.Rank() == 2 {
				root = 7
			}
			_, err := object.Reduce(ctx, c, 1, func(a, b int) int { return a + b }, root, opts...)
			return err
		}, outcome{object.StageArgument, 2, "root 7 out of range", comm.ErrInvalid}},
		{"another root on one rank", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			root := 0
			if c.Rank() == 3 {
				root = 1
			}
			_, err := object.Reduce(ctx, c, 1, func(a, b int) int { return a + b }, root, opts...)
			return err
		}, outcome{object.StageArgument, 3, "another root or schedule", comm.ErrInvalid}},
		{"another schedule on one rank", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			if c.Rank() == 1 {
				if len(opts) == 0 {
					opts = []object.ReduceOption{object.Associative()}
				} else {
					opts = nil
				}
			}
			_, err := object.AllReduce(ctx, c, 1, func(a, b int) int { return a + b }, opts...)
			return err
		}, outcome{object.StageArgument, 1, "another root or schedule", comm.ErrInvalid}},
		{"decode", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			v := picky{c.Rank()}
			if c.Rank() == 3 {
				v.X = 13
			}
			_, err := object.AllReduce(ctx, c, v, func(a, b picky) picky { return picky{a.X + b.X} }, opts...)
			return err
		}, outcome{object.StageDecode, -1, "unlucky", nil}},
		{"panic", func(ctx context.Context, c *comm.Comm, opts []object.ReduceOption) error {
			_, err := object.Reduce(ctx, c, fmt.Sprint(c.Rank()), func(a, b string) string {
				if strings.Contains(b, "3") {
					panic("three is not welcome")
				}
				return a + b
			}, 1, opts...)
			return err
		}, outcome{object.StageReduce, -1, "three is not welcome", nil}},
	}
	for _, s := range schedules {
		world := localWorld(t, 5)
		for _, tc := range cases {
			t.Run(s.name+"/"+tc.name, func(t *testing.T) {
				start := time.Now()
				_, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (struct{}, error) {
					return struct{}{}, tc.run(ctx, c, s.opts)
				})
				if d := time.Since(start); d > 20*time.Second {
					t.Fatalf("took %v: ranks waited for a timeout", d)
				}
				var first *object.Error
				for r, err := range errs {
					var oe *object.Error
					if !errors.As(err, &oe) {
						t.Fatalf("rank %d: %v, want an *object.Error", r, err)
					}
					if oe.Stage != tc.want.stage || (tc.want.rank >= 0 && oe.Rank != tc.want.rank) || !strings.Contains(oe.Reason, tc.want.reason) {
						t.Fatalf("rank %d: %+v, want stage %v, rank %d, reason with %q", r, oe, tc.want.stage, tc.want.rank, tc.want.reason)
					}
					if tc.want.local != nil && !errors.Is(err, tc.want.local) {
						t.Fatalf("rank %d: %v does not match %v", r, err, tc.want.local)
					}
					if !strings.Contains(err.Error(), fmt.Sprintf("rank %d", oe.Rank)) {
						t.Fatalf("rank %d: %q does not name the failed rank", r, err)
					}
					if first == nil {
						first = oe
					} else if oe.Rank != first.Rank || oe.Reason != first.Reason {
						t.Fatalf("rank %d: %+v, rank 0: %+v; want the same failure everywhere", r, oe, first)
					}
					if (oe.Err != nil) != (r == oe.Rank) {
						t.Fatalf("rank %d: cause %v; want one on the failed rank (%d) only", r, oe.Err, oe.Rank)
					}
				}
				// The communicator still works afterwards.
				sums, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (int, error) {
					return object.AllReduce(ctx, c, c.Rank(), func(a, b int) int { return a + b }, s.opts...)
				})
				for r, err := range errs {
					if err != nil || sums[r] != 10 {
						t.Fatalf("after the failure: rank %d: %d, %v", r, sums[r], err)
					}
				}
			})
		}
	}
}

// Over TCP too: the tree's messages travel point to point on a private
// view of the communicator, beside the caller's own sends and receives.
func TestReduceOverTCPBesideUserMessages(t *testing.T) {
	world := commtest.World(t, "tcp", 3, comm.Options{})
	res, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (string, error) {
		// A message on tag 0 that the reduction must not take.
		next, prev := (c.Rank()+1)%3, (c.Rank()+2)%3
		send := comm.StartSend(ctx, c, []int64{int64(100 + c.Rank())}, next, 0)
		s, err := object.AllReduce(ctx, c, fmt.Sprintf("%d", c.Rank()), func(a, b string) string { return a + b }, object.Associative())
		if err != nil {
			return "", err
		}
		got := []int64{0}
		if _, err := comm.Recv(ctx, c, got, prev, 0); err != nil {
			return "", err
		}
		if err := send.Wait(); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s/%d", s, got[0]), nil
	})
	for r, err := range errs {
		want := fmt.Sprintf("012/%d", 100+(r+2)%3)
		if err != nil || res[r] != want {
			t.Fatalf("rank %d: %q, %v; want %q", r, res[r], err, want)
		}
	}
}

// The other object collectives fail every rank at once too when one rank
// cannot encode its value (issue 13's third point, for objects).
func TestEncodeFailureFailsEveryRank(t *testing.T) {
	world := localWorld(t, 4)
	bad := func(c *comm.Comm, r int) []any {
		if c.Rank() == r {
			return []any{unregistered{1}}
		}
		return []any{c.Rank()}
	}
	cases := []struct {
		name string
		rank int
		run  func(ctx context.Context, c *comm.Comm) error
	}{
		{"Broadcast", 1, func(ctx context.Context, c *comm.Comm) error {
			v := bad(c, 1)
			return object.Broadcast(ctx, c, &v, 1)
		}},
		{"AllGather", 2, func(ctx context.Context, c *comm.Comm) error {
			_, err := object.AllGather(ctx, c, bad(c, 2))
			return err
		}},
		{"Gather", 3, func(ctx context.Context, c *comm.Comm) error {
			_, err := object.Gather(ctx, c, bad(c, 3), 0)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) (struct{}, error) {
				return struct{}{}, tc.run(ctx, c)
			})
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("took %v: ranks waited for a timeout", d)
			}
			for r, err := range errs {
				var oe *object.Error
				if !errors.As(err, &oe) || oe.Rank != tc.rank || oe.Stage != object.StageEncode || !strings.Contains(oe.Reason, "not registered") || !errors.Is(err, comm.ErrInvalid) {
					t.Fatalf("rank %d: %v; want an encode failure of rank %d", r, err, tc.rank)
				}
			}
			// Still usable afterwards.
			all, errs := onRanks(world, func(ctx context.Context, c *comm.Comm) ([]int, error) {
				return object.AllGather(ctx, c, c.Rank())
			})
			for r, err := range errs {
				if err != nil || !slices.Equal(all[r], []int{0, 1, 2, 3}) {
					t.Fatalf("afterwards: rank %d: %v, %v", r, all[r], err)
				}
			}
		})
	}
}
