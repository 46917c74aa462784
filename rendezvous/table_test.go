package rendezvous

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// naiveCompareSet is torch's compare_set rule written as plainly as
// possible, over a map.
func naiveCompareSet(m map[string]string, key, expected, desired string) string {
	cur, ok := m[key]
	if !ok {
		if expected == "" {
			m[key] = desired
			return desired
		}
		return expected
	}
	if cur == expected {
		m[key] = desired
		return desired
	}
	return cur
}

type modelWaiter struct {
	w       *waiter
	missing map[string]bool // keys not yet set since registration
}

// TestTableAgainstModel runs random operations on a table and on a naive
// model (a map, and for each waiter the keys it still misses) and compares
// every result and every waiter's readiness.
func TestTableAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 99))
		tb := newTable()
		model := map[string]string{}
		var waiters []*modelWaiter
		keys := []string{"a", "b", "c", "d", ""}
		key := func() string { return keys[r.IntN(len(keys))] }
		val := func() string { return []string{"", "x", "y", "7", "-3"}[r.IntN(5)] }
		setInModel := func(k, v string) {
			model[k] = v
			for _, mw := range waiters {
				delete(mw.missing, k)
			}
		}
		for step := range 400 {
			desc := ""
			switch r.IntN(8) {
			case 0:
				k, v := key(), val()
				desc = fmt.Sprintf("set(%q, %q)", k, v)
				tb.set(k, []byte(v))
				setInModel(k, v)
			case 1:
				k, d := key(), int64(r.IntN(7)-3)
				desc = fmt.Sprintf("add(%q, %d)", k, d)
				got, err := tb.add(k, d)
				old := model[k]
				if n, perr := strconv.ParseInt(old, 10, 64); old == "" || perr == nil {
					want := n + d
					if err != nil || got != want {
						t.Fatalf("seed %d step %d %s = %d, %v; want %d", seed, step, desc, got, err, want)
					}
					setInModel(k, strconv.FormatInt(want, 10))
				} else if !errors.Is(err, ErrBadCounter) {
					t.Fatalf("seed %d step %d %s on %q: err %v, want ErrBadCounter", seed, step, desc, old, err)
				}
			case 2:
				k, e, d := key(), val(), val()
				desc = fmt.Sprintf("compareSet(%q, %q, %q)", k, e, d)
				cur, existed := model[k]
				sets := (!existed && e == "") || (existed && cur == e)
				want := naiveCompareSet(model, k, e, d)
				if got := tb.compareSet(k, []byte(e), []byte(d)); string(got) != want {
					t.Fatalf("seed %d step %d %s = %q, want %q", seed, step, desc, got, want)
				}
				if sets {
					setInModel(k, d) // waiters see a compare-and-set that stores as a set
				}
			case 3:
				k := key()
				desc = fmt.Sprintf("remove(%q)", k)
				_, want := model[k]
				delete(model, k)
				if got := tb.remove(k); got != want {
					t.Fatalf("seed %d step %d %s = %v, want %v", seed, step, desc, got, want)
				}
			case 4:
				k, v := key(), val()
				desc = fmt.Sprintf("appendTo(%q, %q)", k, v)
				tb.appendTo(k, []byte(v))
				setInModel(k, model[k]+v)
			case 5:
				ks := []string{key(), key()}
				desc = fmt.Sprintf("watch(%q)", ks)
				w := tb.watch(ks)
				missing := map[string]bool{}
				for _, k := range ks {
					if _, ok := model[k]; !ok {
						missing[k] = true
					}
				}
				if (w == nil) != (len(missing) == 0) {
					t.Fatalf("seed %d step %d %s = %v with missing %v", seed, step, desc, w, missing)
				}
				if w != nil {
					waiters = append(waiters, &modelWaiter{w, missing})
				}
			case 6:
				if len(waiters) > 0 {
					i := r.IntN(len(waiters))
					desc = "unwatch"
					tb.unwatch(waiters[i].w)
					waiters = append(waiters[:i], waiters[i+1:]...)
				}
			case 7:
				ks := []string{key(), key()}
				want := true
				for _, k := range ks {
					if _, ok := model[k]; !ok {
						want = false
					}
				}
				if got := tb.check(ks); got != want {
					t.Fatalf("seed %d step %d check(%q) = %v, want %v", seed, step, ks, got, want)
				}
			}
			for k, v := range model {
				if got, ok := tb.get(k); !ok || string(got) != v {
					t.Fatalf("seed %d after step %d %s: %q = %q, %v; want %q", seed, step, desc, k, got, ok, v)
				}
			}
			if tb.numKeys() != int64(len(model)) {
				t.Fatalf("seed %d after step %d %s: numKeys %d, want %d", seed, step, desc, tb.numKeys(), len(model))
			}
			for i, mw := range waiters {
				ready := false
				select {
				case <-mw.w.ready:
					ready = true
				default:
				}
				if ready != (len(mw.missing) == 0) {
					t.Fatalf("seed %d after step %d %s: waiter %d ready=%v, still missing %v", seed, step, desc, i, ready, mw.missing)
				}
			}
		}
	}
}

func TestAddCounter(t *testing.T) {
	tests := []struct {
		old   string
		delta int64
		want  int64
		err   error
	}{
		{"", 1, 1, nil},
		{"41", 1, 42, nil},
		{"-5", 3, -2, nil},
		{"9223372036854775806", 1, 9223372036854775807, nil},
		{"9223372036854775807", 1, 0, ErrBadCounter},
		{"-9223372036854775808", -1, 0, ErrBadCounter},
		{"12abc", 1, 0, ErrBadCounter},
		{" 1", 1, 0, ErrBadCounter},
		{"99999999999999999999", 1, 0, ErrBadCounter},
	}
	for _, tc := range tests {
		got, text, err := addCounter([]byte(tc.old), tc.delta)
		if !errors.Is(err, tc.err) || got != tc.want || (err == nil && string(text) != strconv.FormatInt(tc.want, 10)) {
			t.Errorf("addCounter(%q, %d) = %d, %q, %v; want %d, %v", tc.old, tc.delta, got, text, err, tc.want, tc.err)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Op: "get", Keys: []string{"addr/3"}, Store: "tcp 10.0.0.1:29500", Err: ErrStoreClosed},
			`rendezvous: get "addr/3" on tcp 10.0.0.1:29500: comm: rendezvous store closed`},
		{&Error{Op: "wait", Keys: []string{"a", "b"}, Err: ErrStoreClosed},
			`rendezvous: wait ["a" "b"]: comm: rendezvous store closed`},
		{&Error{Op: "num-keys", Store: "file /x"}, `rendezvous: num-keys on file /x`},
		{&Error{Op: "wait", Keys: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8"}, Err: ErrStoreClosed},
			`rendezvous: wait ["0" ... 9 keys]: comm: rendezvous store closed`},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %s\nwant      %s", got, tc.want)
		}
	}
}
