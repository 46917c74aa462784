package testkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EtcdBinary is where Debian's etcd-server package installs etcd;
// $GOCOMM_TEST_ETCD names another.
const EtcdBinary = "/usr/bin/etcd"

// ErrNoEtcd is returned by NewEtcd when there is no etcd binary to run.
var ErrNoEtcd = errors.New("etcd is not installed (apt-get install etcd-server to run this test)")

// Etcd is a one-member etcd cluster for tests: a real etcd server on free
// loopback ports with its data in a directory of its own.
type Etcd struct {
	bin        string
	dir        string
	clientPort int
	peerPort   int
	log        *LockedBuffer

	mu     sync.Mutex // protects following
	cmd    *exec.Cmd
	exited chan error // receives cmd's exit
}

// StartEtcd starts an etcd server for t (see NewEtcd) and kills it when t
// ends. Without an etcd binary t is skipped, with the package to install.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	e, err := NewEtcd(t.TempDir())
	if errors.Is(err, ErrNoEtcd) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Kill)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	return e
}

// NewEtcd prepares a server keeping its data in dir, on two loopback ports
// free at the time; Start starts it. It fails with ErrNoEtcd when neither
// $GOCOMM_TEST_ETCD nor EtcdBinary is an etcd to run; a $GOCOMM_TEST_ETCD
// that names no file is an error of its own, not a reason to skip.
func NewEtcd(dir string) (*Etcd, error) {
	bin := os.Getenv("GOCOMM_TEST_ETCD")
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("GOCOMM_TEST_ETCD=%s: %w", bin, err)
		}
	}
	if bin == "" {
		bin = EtcdBinary
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEtcd, err)
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close() // both held until both are chosen
	}
	return &Etcd{bin: bin, dir: dir, clientPort: ports[0], peerPort: ports[1], log: &LockedBuffer{}}, nil
}

// Endpoint is the server's client address, "127.0.0.1:port".
func (e *Etcd) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(e.clientPort) }

// Start starts the server (again, after Kill: on the same ports and data)
// and returns once it serves requests, or fails within 30 s.
func (e *Etcd) Start() error {
	client := "http://" + e.Endpoint()
	peer := "http://127.0.0.1:" + strconv.Itoa(e.peerPort)
	cmd := exec.Command(e.bin,
		"--name", "test", "--data-dir", e.dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer,
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = e.log, e.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", e.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	e.mu.Lock()
	e.cmd, e.exited = cmd, exited
	e.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for !e.healthy() {
		select {
		case err := <-exited:
			e.mu.Lock()
			e.cmd = nil
			e.mu.Unlock()
			return fmt.Errorf("etcd exited while starting: %v\n%s", err, e.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.Kill()
			return fmt.Errorf("etcd did not become healthy within 30s:\n%s", e.log.String())
		}
	}
	return nil
}

// healthy reports whether the server answers /health with a leader.
func (e *Etcd) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.Endpoint()+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"true"`)
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Killing a server that is not running does nothing.
func (e *Etcd) Kill() {
	e.mu.Lock()
	cmd, exited := e.cmd, e.exited
	e.cmd = nil
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Log is what the server printed, for failure messages.
func (e *Etcd) Log() string { return e.log.String() }
