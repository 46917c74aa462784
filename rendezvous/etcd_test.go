package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gocomm/comm/internal/testkit"
)

// The etcd store's tests run against a real etcd server (Debian's
// etcd-server), one for the package, started on first use and stopped by
// TestMain (StopSharedEtcd); each test takes a prefix of its own. Without
// etcd they are skipped.
var sharedEtcd struct {
	once sync.Once
	srv  *testkit.Etcd
	dir  string
	err  error
}

var prefixes atomic.Int64

// etcdServer returns the package's etcd server, starting it if needed.
func etcdServer(t *testing.T) *testkit.Etcd {
	t.Helper()
	s := &sharedEtcd
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "gocomm-etcd-"); s.err != nil {
			return
		}
		if s.srv, s.err = testkit.NewEtcd(s.dir); s.err != nil {
			return
		}
		s.err = s.srv.Start()
	})
	if errors.Is(s.err, testkit.ErrNoEtcd) {
		t.Skip(s.err)
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.srv
}

// StopSharedEtcd stops the package's etcd server, if a test started it.
func StopSharedEtcd() {
	if s := &sharedEtcd; s.srv != nil {
		s.srv.Kill()
	}
	if sharedEtcd.dir != "" {
		os.RemoveAll(sharedEtcd.dir)
	}
}

// freshPrefix is a prefix no other test uses (short: keys near MaxKeyLen
// must fit).
func freshPrefix() string { return "/t" + strconv.FormatInt(prefixes.Add(1), 36) }

func openEtcd(t *testing.T, endpoint, prefix string, opts ...EtcdOption) *EtcdStore {
	t.Helper()
	s, err := NewEtcdStore(testCtx(t), []string{endpoint}, prefix, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	return s
}

// etcdPair is two ranks' clients of one job's prefix, beside a neighbour
// job whose keys must not show through.
func etcdPair(t *testing.T) (Store, Store) {
	srv := etcdServer(t)
	prefix := freshPrefix()
	other := openEtcd(t, srv.Endpoint(), prefix+"x")
	for _, k := range []string{"k", "late", "c", "a", "b"} {
		if err := other.Set(testCtx(t), k, []byte("other")); err != nil {
			t.Fatal(err)
		}
	}
	return openEtcd(t, srv.Endpoint(), prefix, WithLeaseTTL(2*time.Second)), openEtcd(t, srv.Endpoint(), prefix, WithLeaseTTL(2*time.Second))
}

// rawEtcd is a plain client, which keeps no lease of a store alive.
func rawEtcd(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func rawExists(t *testing.T, c *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := c.Get(testCtx(t), key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count > 0
}

func TestEtcdWaitManyKeys(t *testing.T) {
	srv := etcdServer(t)
	prefix := freshPrefix()
	a, b := openEtcd(t, srv.Endpoint(), prefix), openEtcd(t, srv.Endpoint(), prefix)
	ctx := testCtx(t)
	keys := make([]string, 3*etcdTxnOps+7) // several transactions
	for i := range keys {
		keys[i] = fmt.Sprintf("k/%d", i)
	}
	for _, k := range keys[:len(keys)-1] {
		mustSet(t, b, k, "v")
	}
	if ok, err := a.Check(ctx, keys...); err != nil || ok {
		t.Fatalf("Check with the last key missing = %v, %v", ok, err)
	}
	done := asyncWait(ctx, a, keys...)
	notYet(t, done, "Wait with one key missing")
	mustSet(t, b, keys[len(keys)-1], "v")
	if err := within(t, done, 5*time.Second, "Wait"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Check(ctx, keys...); err != nil || !ok {
		t.Fatalf("Check with every key set = %v, %v", ok, err)
	}
}

// A rank's leased keys go when it closes; the job's stay while a rank of
// the job lives, and expire TTL after the last one left.
func TestEtcdLeases(t *testing.T) {
	srv := etcdServer(t)
	raw := rawEtcd(t, srv.Endpoint())
	prefix := freshPrefix()
	ttl := WithLeaseTTL(2 * time.Second)
	a, b := openEtcd(t, srv.Endpoint(), prefix, ttl), openEtcd(t, srv.Endpoint(), prefix, ttl)
	ctx := testCtx(t)
	if err := a.SetLeased(ctx, "live/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	mustSet(t, a, "shared", "from a")
	if _, err := a.Add(ctx, "count", 1); err != nil {
		t.Fatal(err)
	}
	wantValue(t, b, "live/a", "1")
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Check(ctx, "live/a"); err != nil || ok {
		t.Fatalf("a's leased key after a closed: present=%v, %v", ok, err)
	}
	// b keeps the job's lease alive, well past its TTL.
	time.Sleep(3 * time.Second)
	for _, k := range []string{"shared", "count"} {
		if ok, err := b.Check(ctx, k); err != nil || !ok {
			t.Fatalf("%s written by a, %v after a closed: present=%v, %v", k, time.Since(start), ok, err)
		}
	}
	// The last rank gone, the job's keys expire.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the job's keys expiring after its last client closed", func() bool {
		return !rawExists(t, raw, prefix+"/shared") && !rawExists(t, raw, prefix+".lease")
	})
	// A new job under the prefix starts afresh.
	c := openEtcd(t, srv.Endpoint(), prefix, ttl)
	if n, err := c.NumKeys(ctx); err != nil || n != 0 {
		t.Fatalf("NumKeys of a prefix whose job expired = %d, %v", n, err)
	}
	mustSet(t, c, "again", "yes")
}

func TestEtcdRemoveAll(t *testing.T) {
	srv := etcdServer(t)
	prefix := freshPrefix()
	a, b := openEtcd(t, srv.Endpoint(), prefix), openEtcd(t, srv.Endpoint(), prefix)
	ctx := testCtx(t)
	mustSet(t, a, "x", "1")
	if err := b.SetLeased(ctx, "y", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveAll(ctx); err != nil {
		t.Fatal(err)
	}
	raw := rawEtcd(t, srv.Endpoint())
	resp, err := raw.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys under %s after RemoveAll: %d, %v", prefix, resp.Count, err)
	}
	// The job's lease is gone: the other rank's store says so.
	err = b.Set(ctx, "z", nil)
	if !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Set after another rank's RemoveAll: %v, want ErrLeaseExpired", err)
	}
	if _, err := b.Get(ctx, "x"); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Get after the lease was lost: %v, want ErrLeaseExpired", err)
	}
	// Closed, it says so instead.
	b.Close()
	if _, err := b.Get(ctx, "x"); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("Get after Close: %v, want ErrStoreClosed", err)
	}
}

// The store notices a lease that is gone (here revoked behind its back)
// and fails every call with ErrLeaseExpired, blocked ones included.
func TestEtcdLostLease(t *testing.T) {
	srv := etcdServer(t)
	s := openEtcd(t, srv.Endpoint(), freshPrefix(), WithLeaseTTL(2*time.Second))
	ctx := testCtx(t)
	blocked := asyncGet(ctx, s, "never")
	notYet(t, blocked, "Get")
	if _, err := rawEtcd(t, srv.Endpoint()).Revoke(ctx, s.own); err != nil {
		t.Fatal(err)
	}
	r := within(t, blocked, 10*time.Second, "Get across the loss of the lease")
	if !errors.Is(r.err, ErrLeaseExpired) {
		t.Fatalf("blocked Get: %v, want ErrLeaseExpired", r.err)
	}
	if err := s.Set(ctx, "k", nil); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Set: %v, want ErrLeaseExpired", err)
	}
}

func TestEtcdBadInput(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name      string
		endpoints []string
		prefix    string
		opts      []EtcdOption
	}{
		{"no endpoints", nil, "/job", nil},
		{"empty endpoint", []string{" "}, "/job", nil},
		{"no prefix", []string{"127.0.0.1:1"}, "", nil},
		{"root prefix", []string{"127.0.0.1:1"}, "///", nil},
		{"zero TTL", []string{"127.0.0.1:1"}, "/job", []EtcdOption{WithLeaseTTL(0)}},
		{"negative connect timeout", []string{"127.0.0.1:1"}, "/job", []EtcdOption{WithConnectTimeout(-1)}},
	} {
		s, err := NewEtcdStore(ctx, tc.endpoints, tc.prefix, tc.opts...)
		var e *Error
		if err == nil || !errors.As(err, &e) || e.Op != "dial" {
			t.Errorf("%s: NewEtcdStore = %v, %v; want a dial *Error", tc.name, s, err)
		}
	}
	// Nobody there: ErrMasterUnreachable once the connect timeout passes.
	port := testkit.FreePort(t)
	start := time.Now()
	_, err := NewEtcdStore(ctx, []string{"127.0.0.1:" + strconv.Itoa(port)}, "/job", WithConnectTimeout(300*time.Millisecond))
	if !errors.Is(err, ErrMasterUnreachable) {
		t.Fatalf("NewEtcdStore with no server: %v, want ErrMasterUnreachable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("NewEtcdStore took %v to give up", d)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = NewEtcdStore(short, []string{"127.0.0.1:" + strconv.Itoa(port)}, "/job")
	if !errors.Is(err, ErrMasterUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewEtcdStore with no server and a short ctx: %v", err)
	}
}
