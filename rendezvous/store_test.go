package rendezvous

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// storeKind opens two handles on one fresh store: two ranks' views of it.
// For MemStore both are the same value.
type storeKind struct {
	name string
	tcp  bool // the server drops the connection on a bad counter
	open func(t *testing.T) (a, b Store)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func closeAll(t *testing.T, cs ...interface{ Close() error }) {
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
}

func tcpPair(t *testing.T, d dialect) (Store, Store) {
	srv, err := ListenTCPStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := dialTCPStore(testCtx(t), srv.Addr().String(), d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dialTCPStore(testCtx(t), srv.Addr().String(), d)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, a, b, srv)
	return a, b
}

func storeKinds() []storeKind {
	return []storeKind{
		{name: "mem", open: func(t *testing.T) (Store, Store) {
			m := NewMemStore()
			closeAll(t, m)
			return m, m
		}},
		{name: "prefix-mem", open: func(t *testing.T) (Store, Store) {
			m := NewMemStore()
			a, b := NewPrefixStore("job/attempt_0", m), NewPrefixStore("job/attempt_0", m)
			// A neighbour namespace with the same keys must not interfere.
			other := NewPrefixStore("job/attempt_1", m)
			for _, k := range []string{"k", "late", "c", "a", "b"} {
				if err := other.Set(context.Background(), k, []byte("other")); err != nil {
					t.Fatal(err)
				}
			}
			closeAll(t, a, b, other, m)
			return a, b
		}},
		{name: "file", open: func(t *testing.T) (Store, Store) {
			if !fileStoreSupported {
				t.Skip("the file store needs flock(2), which this platform lacks")
			}
			path := filepath.Join(t.TempDir(), "store")
			a, err := NewFileStore(path)
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewFileStore(path)
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, a, b)
			return a, b
		}},
		{name: "tcp", tcp: true, open: func(t *testing.T) (Store, Store) { return tcpPair(t, dialectV1) }},
		{name: "tcp-2.x", tcp: true, open: func(t *testing.T) (Store, Store) { return tcpPair(t, dialectV2) }},
		{name: "tcp-master", tcp: true, open: func(t *testing.T) (Store, Store) {
			a, err := NewTCPStore(testCtx(t), "127.0.0.1:0", true)
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewTCPStore(testCtx(t), a.Addr(), false)
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, b, a)
			return a, b
		}},
		{name: "prefix-tcp", tcp: true, open: func(t *testing.T) (Store, Store) {
			a, b := tcpPair(t, dialectV1)
			pa, pb := NewPrefixStore("p", a), NewPrefixStore("p", b)
			closeAll(t, pa, pb)
			return pa, pb
		}},
		{name: "etcd", open: func(t *testing.T) (Store, Store) { return etcdPair(t) }},
	}
}

// TestStore is the behavioural suite every Store passes.
func TestStore(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, k storeKind, a, b Store)
	}{
		{"SetGetOverwrite", testSetGetOverwrite},
		{"GetBlocksUntilSet", testGetBlocksUntilSet},
		{"WaitBlocksUntilAllSet", testWaitBlocksUntilAllSet},
		{"ContextEndsBlockingCalls", testContextEndsBlockingCalls},
		{"Add", testAdd},
		{"ConcurrentAdd", testConcurrentAdd},
		{"CompareAndSet", testCompareAndSet},
		{"Delete", testDelete},
		{"NumKeys", testNumKeys},
		{"Check", testCheck},
		{"ConcurrentSetGet", testConcurrentSetGet},
		{"TooLarge", testTooLarge},
		{"Close", testClose},
	}
	for _, k := range storeKinds() {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					a, b := k.open(t)
					tc.run(t, k, a, b)
				})
			}
		})
	}
}

func mustGet(t *testing.T, s Store, key string) []byte {
	t.Helper()
	v, err := s.Get(testCtx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return v
}

func mustSet(t *testing.T, s Store, key, value string) {
	t.Helper()
	if err := s.Set(testCtx(t), key, []byte(value)); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

func wantValue(t *testing.T, s Store, key, want string) {
	t.Helper()
	if got := mustGet(t, s, key); string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func testSetGetOverwrite(t *testing.T, _ storeKind, a, b Store) {
	mustSet(t, a, "k", "v1")
	wantValue(t, a, "k", "v1")
	wantValue(t, b, "k", "v1")
	mustSet(t, a, "k", "v2")
	wantValue(t, a, "k", "v2")

	// Empty and binary values round-trip; an empty value exists.
	mustSet(t, a, "empty", "")
	if v := mustGet(t, b, "empty"); v == nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %#v, want empty non-nil", v)
	}
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	if err := a.Set(testCtx(t), "bin", bin); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b, "bin"); !bytes.Equal(got, bin) {
		t.Fatalf("binary value changed: %x", got)
	}

	// The store copies values in and out.
	in := []byte("owned")
	if err := a.Set(testCtx(t), "own", in); err != nil {
		t.Fatal(err)
	}
	in[0] = 'X'
	out := mustGet(t, a, "own")
	out[1] = 'Y'
	wantValue(t, a, "own", "owned")
}

type getResult struct {
	v   []byte
	err error
}

func (r getResult) String() string { return fmt.Sprintf("value %q, error %v", r.v, r.err) }

func asyncGet(ctx context.Context, s Store, key string) chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		v, err := s.Get(ctx, key)
		ch <- getResult{v, err}
	}()
	return ch
}

func asyncWait(ctx context.Context, s Store, keys ...string) chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Wait(ctx, keys...) }()
	return ch
}

func notYet[T any](t *testing.T, ch chan T, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: %v", what, r)
	case <-time.After(50 * time.Millisecond):
	}
}

func within[T any](t *testing.T, ch chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

func testGetBlocksUntilSet(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	fromOther := asyncGet(ctx, a, "late")
	fromSame := asyncGet(ctx, b, "late")
	notYet(t, fromOther, "Get of a missing key")
	mustSet(t, b, "late", "here")
	for _, ch := range []chan getResult{fromOther, fromSame} {
		r := within(t, ch, 5*time.Second, "Get after Set")
		if r.err != nil || string(r.v) != "here" {
			t.Fatalf("Get = %q, %v; want here", r.v, r.err)
		}
	}
	// A compare-and-set that creates the key wakes a Get too.
	cas := asyncGet(ctx, a, "cas-late")
	notYet(t, cas, "Get of a missing key")
	if _, err := b.CompareAndSet(ctx, "cas-late", nil, []byte("made")); err != nil {
		t.Fatal(err)
	}
	if r := within(t, cas, 5*time.Second, "Get after CompareAndSet"); r.err != nil || string(r.v) != "made" {
		t.Fatalf("Get = %q, %v; want made", r.v, r.err)
	}
	// And so does Add.
	add := asyncGet(ctx, a, "add-late")
	notYet(t, add, "Get of a missing key")
	if _, err := b.Add(ctx, "add-late", 7); err != nil {
		t.Fatal(err)
	}
	if r := within(t, add, 5*time.Second, "Get after Add"); r.err != nil || string(r.v) != "7" {
		t.Fatalf("Get = %q, %v; want 7", r.v, r.err)
	}
}

func testWaitBlocksUntilAllSet(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	if err := a.Wait(ctx); err != nil {
		t.Fatalf("Wait() with no keys: %v", err)
	}
	done := asyncWait(ctx, a, "a", "b", "a")
	notYet(t, done, "Wait")
	mustSet(t, b, "a", "1")
	notYet(t, done, "Wait with one of two keys set")
	mustSet(t, b, "b", "2")
	if err := within(t, done, 5*time.Second, "Wait"); err != nil {
		t.Fatal(err)
	}
	// Keys that exist already: no blocking.
	if err := within(t, asyncWait(ctx, b, "a", "b"), 5*time.Second, "Wait on present keys"); err != nil {
		t.Fatal(err)
	}
}

func testContextEndsBlockingCalls(t *testing.T, k storeKind, a, b Store) {
	check := func(err error, want error, op string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", op, err, want)
		}
		var e *Error
		if !errors.As(err, &e) || e.Op != op || !slices.Contains(e.Keys, "never") {
			t.Fatalf("%s: error %#v does not name op and key", op, err)
		}
	}
	for range 2 { // twice: the store must recover its connections
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_, err := a.Get(ctx, "never")
		cancel()
		check(err, context.DeadlineExceeded, "get")
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Get returned %v after its deadline", d)
		}

		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		err = a.Wait(ctx, "never", "never-either")
		cancel()
		check(err, context.DeadlineExceeded, "wait")

		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		err = b.Wait(ctx, "never")
		check(err, context.Canceled, "wait")

		// Already-cancelled contexts fail fast too.
		_, err = a.Get(ctx, "never")
		check(err, context.Canceled, "get")

		mustSet(t, a, "after", "ok")
		wantValue(t, a, "after", "ok")
		wantValue(t, b, "after", "ok")
	}
}

func testAdd(t *testing.T, k storeKind, a, b Store) {
	ctx := testCtx(t)
	for _, step := range []struct {
		delta, want int64
	}{{5, 5}, {-2, 3}, {0, 3}, {-10, -7}, {1 << 40, 1<<40 - 7}} {
		got, err := a.Add(ctx, "c", step.delta)
		if err != nil || got != step.want {
			t.Fatalf("Add(c, %d) = %d, %v; want %d", step.delta, got, err, step.want)
		}
	}
	wantValue(t, b, "c", fmt.Sprint(int64(1<<40-7)))

	// An empty value counts as zero; a set decimal value is a counter.
	mustSet(t, a, "e", "")
	if got, err := a.Add(ctx, "e", 2); err != nil || got != 2 {
		t.Fatalf("Add on empty value = %d, %v; want 2", got, err)
	}
	mustSet(t, a, "d", "-41")
	if got, err := a.Add(ctx, "d", 1); err != nil || got != -40 {
		t.Fatalf("Add on \"-41\" = %d, %v; want -40", got, err)
	}

	// Not a counter, or overflowing: an error, and the store still works.
	mustSet(t, a, "text", "abc")
	mustSet(t, a, "max", "9223372036854775807")
	next := int64(1<<40 - 7)
	for _, key := range []string{"text", "max"} {
		_, err := a.Add(ctx, key, 1)
		want := ErrBadCounter
		if k.tcp {
			want = ErrConnectionLost
		}
		if !errors.Is(err, want) {
			t.Fatalf("Add(%s) err = %v, want %v", key, err, want)
		}
		next += 7
		if got, err := a.Add(ctx, "c", 7); err != nil || got != next {
			t.Fatalf("Add after a failed Add = %d, %v; want %d", got, err, next)
		}
	}
	wantValue(t, b, "text", "abc")
}

func testConcurrentAdd(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	const goroutines, adds = 8, 25
	results := make(chan int64, goroutines*adds)
	var wg sync.WaitGroup
	for g := range goroutines {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range adds {
				n, err := s.Add(ctx, "counter", 1)
				if err != nil {
					t.Error(err)
					return
				}
				results <- n
			}
		})
	}
	wg.Wait()
	close(results)
	// Every Add saw a distinct value: together exactly 1..goroutines*adds.
	var got []int64
	for n := range results {
		got = append(got, n)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != int64(i+1) {
			t.Fatalf("Add results are not 1..%d: %v", goroutines*adds, got)
		}
	}
	wantValue(t, a, "counter", fmt.Sprint(goroutines*adds))
}

func testCompareAndSet(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	cas := func(s Store, key, expected, desired, want string) {
		t.Helper()
		got, err := s.CompareAndSet(ctx, key, []byte(expected), []byte(desired))
		if err != nil || string(got) != want {
			t.Fatalf("CompareAndSet(%q, %q, %q) = %q, %v; want %q", key, expected, desired, got, err, want)
		}
	}
	// Missing key, empty expected: set.
	cas(a, "k", "", "d1", "d1")
	wantValue(t, b, "k", "d1")
	// Missing key, non-empty expected: expected comes back, nothing is set.
	cas(a, "absent", "x", "d", "x")
	if ok, err := a.Check(ctx, "absent"); err != nil || ok {
		t.Fatalf("CompareAndSet on a missing key with an expected value created it (%v, %v)", ok, err)
	}
	// Present and equal: set.
	cas(b, "k", "d1", "d2", "d2")
	wantValue(t, a, "k", "d2")
	// Present and different: the current value comes back, unchanged.
	cas(a, "k", "nope", "d3", "d2")
	cas(a, "k", "", "d3", "d2")
	wantValue(t, b, "k", "d2")
	// Present with an empty value equals an empty expected value.
	mustSet(t, a, "blank", "")
	cas(a, "blank", "", "filled", "filled")
}

func testDelete(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	mustSet(t, a, "k", "v")
	if ok, err := a.Delete(ctx, "k"); err != nil || !ok {
		t.Fatalf("Delete(existing) = %v, %v; want true", ok, err)
	}
	if ok, err := b.Check(ctx, "k"); err != nil || ok {
		t.Fatalf("Check after Delete = %v, %v; want false", ok, err)
	}
	if ok, err := b.Delete(ctx, "k"); err != nil || ok {
		t.Fatalf("Delete(missing) = %v, %v; want false", ok, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.Get(short, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get after Delete: %v, want a deadline error", err)
	}
	// A deleted key can be set again, and a Get blocked on it wakes.
	got := asyncGet(ctx, a, "k")
	notYet(t, got, "Get of a deleted key")
	mustSet(t, b, "k", "again")
	if r := within(t, got, 5*time.Second, "Get"); r.err != nil || string(r.v) != "again" {
		t.Fatalf("Get = %q, %v", r.v, r.err)
	}
}

func testNumKeys(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	n0, err := a.NumKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := func(s Store, n int64) {
		t.Helper()
		if got, err := s.NumKeys(ctx); err != nil || got != n {
			t.Fatalf("NumKeys = %d, %v; want %d", got, err, n)
		}
	}
	mustSet(t, a, "x", "1")
	mustSet(t, a, "y", "2")
	if _, err := a.Add(ctx, "z", 1); err != nil {
		t.Fatal(err)
	}
	want(a, n0+3)
	mustSet(t, a, "x", "overwritten")
	want(a, n0+3)
	if _, err := a.Delete(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	want(a, n0+2)
	want(b, n0+2)
}

func testCheck(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	want := func(s Store, ok bool, keys ...string) {
		t.Helper()
		if got, err := s.Check(ctx, keys...); err != nil || got != ok {
			t.Fatalf("Check(%q) = %v, %v; want %v", keys, got, err, ok)
		}
	}
	want(a, true)
	want(a, false, "a", "b")
	mustSet(t, a, "a", "1")
	want(a, true, "a")
	want(a, false, "a", "b")
	mustSet(t, a, "b", "")
	want(a, true, "a", "b")
	want(a, true, "b", "a", "b")
}

func testConcurrentSetGet(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		w, r := a, b
		if i%2 == 1 {
			w, r = b, a
		}
		key := fmt.Sprintf("rank/%d", i)
		next := fmt.Sprintf("rank/%d", (i+1)%n)
		wg.Go(func() {
			if err := w.Set(ctx, key, []byte(key)); err != nil {
				t.Error(err)
				return
			}
			v, err := r.Get(ctx, next)
			if err != nil || string(v) != next {
				t.Errorf("Get(%s) = %q, %v", next, v, err)
			}
		})
	}
	wg.Wait()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("rank/%d", i)
	}
	if err := a.Wait(ctx, keys...); err != nil {
		t.Fatal(err)
	}
}

func testTooLarge(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	long := strings.Repeat("k", MaxKeyLen+1)
	if err := a.Set(ctx, long, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set of a %d-byte key: %v, want ErrTooLarge", len(long), err)
	}
	if _, err := a.Get(ctx, long); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Get of a %d-byte key: %v, want ErrTooLarge", len(long), err)
	}
	if err := a.Wait(ctx, "ok", long); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Wait with a %d-byte key: %v, want ErrTooLarge", len(long), err)
	}
	// A key just under the limit works (the stored form is what counts).
	fits := strings.Repeat("k", MaxKeyLen-64)
	mustSet(t, a, fits, "v")
	wantValue(t, b, fits, "v")
}

func testClose(t *testing.T, _ storeKind, a, b Store) {
	ctx := testCtx(t)
	mustSet(t, a, "k", "v")
	blockedGet := asyncGet(ctx, a, "never")
	blockedWait := asyncWait(ctx, a, "never")
	notYet(t, blockedGet, "Get")
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := within(t, blockedGet, 5*time.Second, "Get blocked across Close"); !errors.Is(r.err, ErrStoreClosed) {
		t.Fatalf("blocked Get after Close: %v, want ErrStoreClosed", r.err)
	}
	if err := within(t, blockedWait, 5*time.Second, "Wait blocked across Close"); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("blocked Wait after Close: %v, want ErrStoreClosed", err)
	}
	calls := map[string]error{}
	calls["set"] = a.Set(ctx, "k", nil)
	_, calls["get"] = a.Get(ctx, "k")
	calls["wait"] = a.Wait(ctx, "k")
	_, calls["check"] = a.Check(ctx, "k")
	_, calls["add"] = a.Add(ctx, "n", 1)
	_, calls["compare-and-set"] = a.CompareAndSet(ctx, "k", nil, nil)
	_, calls["delete"] = a.Delete(ctx, "k")
	_, calls["num-keys"] = a.NumKeys(ctx)
	for op, err := range calls {
		if !errors.Is(err, ErrStoreClosed) {
			t.Errorf("%s after Close: %v, want ErrStoreClosed", op, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPrefixStoreOfNil(t *testing.T) {
	p := NewPrefixStore("x", nil)
	if err := p.Set(context.Background(), "k", nil); err == nil || !strings.Contains(err.Error(), "nil Store") {
		t.Fatalf("Set on a prefix store of nil: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
