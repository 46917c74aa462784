package rendezvous_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

// Environment of the etcd tests' child processes.
const (
	etcdEndpointEnv = "GOCOMM_TEST_ETCD_ENDPOINT"
	etcdPrefixEnv   = "GOCOMM_TEST_ETCD_PREFIX"
)

// etcdRoles are the child processes of the etcd tests, by role.
var etcdRoles = map[string]func() error{
	// A rank that writes a leased key and a job key, says so on stdout,
	// and lives until it is killed.
	"etcd-holder": func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := rendezvous.NewEtcdStore(ctx, []string{os.Getenv(etcdEndpointEnv)}, os.Getenv(etcdPrefixEnv), rendezvous.WithLeaseTTL(2*time.Second))
		if err != nil {
			return err
		}
		if err := s.SetLeased(ctx, "live/child", []byte("up")); err != nil {
			return err
		}
		if err := s.Set(ctx, "shared", []byte("from the child")); err != nil {
			return err
		}
		fmt.Println("ready")
		<-ctx.Done()
		return errors.New("not killed within a minute")
	},
}

func etcdStore(t *testing.T, ctx context.Context, endpoint, prefix string, ttl time.Duration) *rendezvous.EtcdStore {
	t.Helper()
	s, err := rendezvous.NewEtcdStore(ctx, []string{endpoint}, prefix, rendezvous.WithLeaseTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A rank killed with SIGKILL cannot revoke anything: its leased keys
// expire after the TTL, while the job's keys it wrote stay for the others.
func TestEtcdKilledRankLeasedKeysExpire(t *testing.T) {
	srv := testkit.StartEtcd(t)
	ctx := testkit.Context(t, time.Minute)
	s := etcdStore(t, ctx, srv.Endpoint(), "/killed", 2*time.Second)
	cmd := testkit.RankCommand(ctx, rankRole, "etcd-holder", etcdEndpointEnv+"="+srv.Endpoint(), etcdPrefixEnv+"=/killed")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testkit.LockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("child said %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	if ok, err := s.Check(ctx, "live/child", "shared"); err != nil || !ok {
		t.Fatalf("the child's keys: present=%v, %v", ok, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for {
		ok, err := s.Check(ctx, "live/child")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatal("the killed rank's leased key still there 10s after the kill (TTL 2s)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the leased key expired %v after the kill", time.Since(killed).Round(time.Millisecond))
	if v, err := s.Get(ctx, "shared"); err != nil || string(v) != "from the child" {
		t.Fatalf("the job's key the killed rank wrote: %q, %v", v, err)
	}
}

// etcd killed and restarted while a rank waits: the wait completes once
// the key is set after the restart, a wait bounded by a context ends with
// it meanwhile, and the leases survive.
func TestEtcdRestartMidWait(t *testing.T) {
	srv := testkit.StartEtcd(t)
	ctx := testkit.Context(t, time.Minute)
	a := etcdStore(t, ctx, srv.Endpoint(), "/restart", 3*time.Second)
	b := etcdStore(t, ctx, srv.Endpoint(), "/restart", 3*time.Second)
	if err := a.SetLeased(ctx, "live/a", []byte("up")); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- a.Wait(ctx, "after-restart") }()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned before the key was set: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	srv.Kill()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	err := b.Wait(short, "never")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("Wait with etcd down: %v after %v, want DeadlineExceeded at its deadline", err, time.Since(start))
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx, "after-restart", []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait across the restart: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait across the restart did not return within 20s of the key being set")
	}
	// Leases survive the restart (etcd renews them when it comes back).
	time.Sleep(4 * time.Second)
	if ok, err := b.Check(ctx, "live/a", "after-restart"); err != nil || !ok {
		t.Fatalf("keys after the restart: present=%v, %v", ok, err)
	}
	if _, err := a.Add(ctx, "n", 1); err != nil {
		t.Fatal(err)
	}
}
