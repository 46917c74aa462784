package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// helperEnv names the role of a re-exec'd test binary (the standard
// library's helper-process pattern); its arguments follow "--".
const helperEnv = "GOCOMM_NETNS_HELPER"

// TestHelperProcess is not a test: it is the program run inside a host.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	if err := runHelper(role, args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runHelper plays one role:
//
//	serve ADDR        listen, print "ready HOST:PORT", accept one connection, send "hello"
//	dial ADDR TIMEOUT connect, print what the server sent
//	sink ADDR N       listen, print "ready HOST:PORT", read N bytes from one connection
//	source ADDR N     connect, write N bytes
//	lookup NAME       print the addresses NAME resolves to
func runHelper(role string, args []string) error {
	need := map[string]int{"serve": 1, "dial": 2, "sink": 2, "source": 2, "lookup": 1}[role]
	if need == 0 || len(args) != need {
		return fmt.Errorf("helper %q: bad arguments %q", role, args)
	}
	switch role {
	case "serve", "sink":
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			return err
		}
		defer ln.Close()
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(15 * time.Second))
		fmt.Printf("ready %s\n", ln.Addr())
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		defer c.Close()
		if role == "serve" {
			_, err = io.WriteString(c, "hello\n")
			return err
		}
		want, _ := strconv.ParseInt(args[1], 10, 64)
		got, err := io.Copy(io.Discard, c)
		if err != nil || got != want {
			return fmt.Errorf("sink got %d bytes of %d: %v", got, want, err)
		}
		return nil
	case "dial":
		timeout, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", args[0], timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		line, err := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
		return err
	case "source":
		n, _ := strconv.Atoi(args[1])
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err != nil {
			return err
		}
		if _, err := c.Write(make([]byte, n)); err != nil {
			return err
		}
		return c.Close()
	default: // lookup
		addrs, err := net.LookupHost(args[0])
		fmt.Println(strings.Join(addrs, " "))
		return err
	}
}

// helper returns a command running role with args inside h.
func helper(t *testing.T, ctx context.Context, h *Host, role string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := h.Command(ctx, exe, append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	cmd.Stderr = os.Stderr
	return cmd
}

// listening starts a serve or sink helper in h on addr and returns the
// address it listens on and a func waiting for it to exit.
func listening(t *testing.T, ctx context.Context, h *Host, role string, args ...string) (string, func() error) {
	t.Helper()
	cmd := helper(t, ctx, h, role, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("%s helper in %s did not start: %q %v", role, h.Name, line, err)
	}
	return addr, cmd.Wait
}

// dial runs a dial helper in h against addr and returns what it printed.
func dial(t *testing.T, ctx context.Context, h *Host, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	out, err := helper(t, ctx, h, "dial", addr, timeout.String()).Output()
	return strings.TrimSpace(string(out)), err
}

// newNetwork skips without namespaces and builds a network closed at cleanup.
func newNetwork(t *testing.T, opts Options) *Network {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no network namespaces can be made here: %v", err)
	}
	start := time.Now()
	nw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("New(%+v) took %v", opts, time.Since(start))
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	return nw
}

func TestConnectAndSetLink(t *testing.T) {
	t.Parallel()
	nw := newNetwork(t, Options{Hosts: 3, IPv6: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs := nw.Hosts()
	if len(hs) != 3 {
		t.Fatalf("Hosts() has %d hosts, want 3", len(hs))
	}
	for i, h := range hs {
		if h.Index != i || h.Link != "eth0" || h.Addr == "" || h.Addr6 == "" {
			t.Fatalf("host %d = %+v", i, *h)
		}
	}
	for _, ip := range []string{hs[2].Addr, hs[2].Addr6} {
		addr, wait := listening(t, ctx, hs[2], "serve", net.JoinHostPort(ip, "0"))
		if got, err := dial(t, ctx, hs[0], addr, 5*time.Second); err != nil || got != "hello" {
			t.Fatalf("dial %s from host 0: %q, %v", addr, got, err)
		}
		if err := wait(); err != nil {
			t.Fatalf("server on %s: %v", addr, err)
		}
	}

	for _, ip := range []string{hs[2].Addr, hs[2].Addr6} {
		addr, wait := listening(t, ctx, hs[2], "serve", net.JoinHostPort(ip, "0"))
		if err := hs[2].SetLink(false); err != nil {
			t.Fatal(err)
		}
		if got, err := dial(t, ctx, hs[0], addr, 500*time.Millisecond); err == nil {
			t.Fatalf("dial %s from host 0 with host 2's link down succeeded: %q", addr, got)
		}
		if err := hs[2].SetLink(true); err != nil {
			t.Fatal(err)
		}
		var got string
		var err error
		for try := 0; try < 5; try++ {
			if got, err = dial(t, ctx, hs[0], addr, time.Second); err == nil {
				break
			}
		}
		if err != nil || got != "hello" {
			t.Fatalf("dial %s from host 0 after the link came back: %q, %v", addr, got, err)
		}
		if err := wait(); err != nil {
			t.Fatalf("server on %s: %v", addr, err)
		}
	}
}

func TestSetHosts(t *testing.T) {
	t.Parallel()
	nw := newNetwork(t, Options{Hosts: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := nw.Hosts()
	names := map[string]string{"node01": hs[1].Addr, "node02": hs[2].Addr}
	if err := hs[0].SetHosts(names); err != nil {
		t.Fatal(err)
	}
	out, err := helper(t, ctx, hs[0], "lookup", "node02").Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != hs[2].Addr {
		t.Fatalf("lookup node02 in host 0 = %q, %v; want %s", got, err, hs[2].Addr)
	}
	out, err = nw.Run(ctx, 0, "cat", "/etc/hosts")
	if err != nil || !strings.Contains(string(out), hs[1].Addr+"\tnode01\n") || !strings.Contains(string(out), "localhost") {
		t.Fatalf("/etc/hosts in host 0:\n%s\n%v", out, err)
	}
	addr, wait := listening(t, ctx, hs[2], "serve", net.JoinHostPort(hs[2].Addr, "0"))
	_, port, _ := net.SplitHostPort(addr)
	if got, err := dial(t, ctx, hs[0], "node02:"+port, 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("dial node02:%s from host 0: %q, %v", port, got, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if err := hs[0].SetHosts(map[string]string{"bad name": "10.0.0.1"}); err == nil {
		t.Error("SetHosts accepted a name with a space")
	}
	if err := hs[0].SetHosts(map[string]string{"node03": "not-an-ip"}); err == nil {
		t.Error("SetHosts accepted a bad address")
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	t.Parallel()
	if err := Available(); err != nil {
		t.Skipf("no network namespaces can be made here: %v", err)
	}
	nw, err := New(Options{Hosts: 2, IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range nw.Hosts() {
		names = append(names, h.Name)
		if err := h.SetHosts(map[string]string{"peer": "10.1.2.3"}); err != nil {
			t.Fatal(err)
		}
	}
	names = append(names, nw.sw)
	if !strings.Contains(listNamespaces(t), names[0]) {
		t.Fatalf("ip netns list lacks %s before Close", names[0])
	}
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := nw.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	list := listNamespaces(t)
	for _, name := range names {
		if strings.Contains(list, name) {
			t.Errorf("ip netns list still shows %s after Close:\n%s", name, list)
		}
		if _, err := os.Stat(filepath.Join(etcNetnsDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/%s still there after Close: %v", etcNetnsDir, name, err)
		}
	}
	h := nw.Hosts()[0]
	for _, err := range []error{h.SetLink(false), h.Shape("1gbit"), h.SetHosts(nil), h.AddDummy("d0", "10.9.9.9/24")} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("method after Close returned %v, want ErrClosed", err)
		}
	}
}

// listNamespaces returns the output of `ip netns list`.
func listNamespaces(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestTwoNetworksAtOnce(t *testing.T) {
	t.Parallel()
	if err := Available(); err != nil {
		t.Skipf("no network namespaces can be made here: %v", err)
	}
	nws := make([]*Network, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range nws {
		wg.Go(func() { nws[i], errs[i] = New(Options{Hosts: 2, IPv6: true}) })
	}
	wg.Wait()
	for i := range nws {
		if nws[i] != nil {
			t.Cleanup(func() {
				if err := nws[i].Close(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	a, b := nws[0].Hosts(), nws[1].Hosts()
	seen := map[string]bool{nws[0].sw: true, nws[1].sw: true}
	for _, h := range append(a, b...) {
		if seen[h.Name] {
			t.Fatalf("namespace name %s used twice", h.Name)
		}
		seen[h.Name] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, hs := range [][]*Host{a, b} {
		addr, wait := listening(t, ctx, hs[1], "serve", net.JoinHostPort(hs[1].Addr, "0"))
		if got, err := dial(t, ctx, hs[0], addr, 5*time.Second); err != nil || got != "hello" {
			t.Fatalf("dial %s from %s: %q, %v", addr, hs[0].Name, got, err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	addr, wait := listening(t, ctx, b[1], "serve", net.JoinHostPort(b[1].Addr, "0"))
	if got, err := dial(t, ctx, a[0], addr, time.Second); err == nil {
		t.Errorf("a host of one network reached %s in the other: %q", addr, got)
	}
	if got, err := dial(t, ctx, b[0], addr, 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("dial %s from %s: %q, %v", addr, b[0].Name, got, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}

func TestAddDummy(t *testing.T) {
	t.Parallel()
	nw := newNetwork(t, Options{Hosts: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := nw.Hosts()
	if err := hs[0].AddDummy("dummy0", "10.99.0.2/24"); err != nil {
		t.Fatal(err)
	}
	out, err := nw.Run(ctx, 0, "ip", "addr", "show", "dev", "dummy0")
	if err != nil || !strings.Contains(string(out), "10.99.0.2/24") {
		t.Fatalf("ip addr show dummy0 in host 0:\n%s\n%v", out, err)
	}
	addr, wait := listening(t, ctx, hs[0], "serve", "10.99.0.2:0")
	if got, err := dial(t, ctx, hs[1], addr, time.Second); err == nil {
		t.Errorf("host 1 reached the dummy address %s: %q", addr, got)
	}
	if got, err := dial(t, ctx, hs[0], addr, 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("dial %s inside host 0: %q, %v", addr, got, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"", "10.1.1.1/24"}, {"a-name-too-long-for-linux", "10.1.1.1/24"}, {"d1", "10.1.1.1"}, {"d1", "nope/24"}} {
		if err := hs[0].AddDummy(bad[0], bad[1]); err == nil {
			t.Errorf("AddDummy(%q, %q) accepted bad input", bad[0], bad[1])
		}
	}
}

// TestShape checks that a shaped link is slower than the rate allows to be
// exceeded: 512 KiB at 8 Mbit/s needs 0.52 s, and a loaded machine only makes
// it slower, so only a lower bound (0.3 s) is checked, in both directions.
func TestShape(t *testing.T) {
	t.Parallel()
	nw := newNetwork(t, Options{Hosts: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := nw.Hosts()
	if err := hs[1].Shape("8mbit"); err != nil {
		t.Fatal(err)
	}
	out, err := nw.Run(ctx, 1, "tc", "qdisc", "show", "dev", "eth0")
	if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "8Mbit") {
		t.Fatalf("tc qdisc show in host 1:\n%s\n%v", out, err)
	}
	const n = 512 << 10
	for _, dir := range [][2]*Host{{hs[0], hs[1]}, {hs[1], hs[0]}} {
		from, to := dir[0], dir[1]
		addr, wait := listening(t, ctx, to, "sink", net.JoinHostPort(to.Addr, "0"), strconv.Itoa(n))
		start := time.Now()
		if err := helper(t, ctx, from, "source", addr, strconv.Itoa(n)).Run(); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("512 KiB from host %d to host %d over a link shaped to 8 Mbit/s took %v, want >= 0.3 s", from.Index, to.Index, d)
		}
	}
	if err := hs[1].Shape("fast"); err == nil {
		t.Error(`Shape("fast") accepted a rate without a number`)
	}
}

func TestNewRemovesLeftovers(t *testing.T) {
	t.Parallel()
	if err := Available(); err != nil {
		t.Skipf("no network namespaces can be made here: %v", err)
	}
	// A process that has exited leaves a pid that is (barring reuse) dead.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := nsPrefix(dead.Process.Pid, 1) + "-h0"
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", stale, err, out)
	}
	dir := filepath.Join(etcNetnsDir, stale)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", stale).Run()
		_ = os.RemoveAll(dir)
	})
	nw, err := New(Options{Hosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	if list := listNamespaces(t); strings.Contains(list, stale) {
		t.Errorf("New left the namespace %s of dead pid %d:\n%s", stale, dead.Process.Pid, list)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New left %s of dead pid %d: %v", dir, dead.Process.Pid, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, n := range []int{-1, 0, maxHosts + 1} {
		if _, err := New(Options{Hosts: n}); err == nil || !strings.Contains(err.Error(), "Options.Hosts") {
			t.Errorf("New(Hosts: %d) = %v, want an error about Options.Hosts", n, err)
		}
	}
}

func TestOwnerPID(t *testing.T) {
	for name, want := range map[string]int{
		"gocomm-123-4-h0": 123, "gocomm-9-1-sw": 9, "gocomm-x-1-sw": 0,
		"gocomm-123": 0, "other-123-4-h0": 0, "gocomm--1-h0": 0,
	} {
		got, ok := ownerPID(name)
		if got != want || ok != (want != 0) {
			t.Errorf("ownerPID(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

func TestRateBits(t *testing.T) {
	for rate, want := range map[string]float64{
		"1gbit": 1e9, "100mbit": 1e8, "8000bit": 8000, "1.5gbit": 1.5e9, "10mbps": 8e7, "2KBIT": 2000,
	} {
		if got, err := rateBits(rate); err != nil || got != want {
			t.Errorf("rateBits(%q) = %v, %v; want %v", rate, got, err, want)
		}
	}
	for _, rate := range []string{"", "fast", "1", "-1gbit", "1furlong", "0mbit"} {
		if _, err := rateBits(rate); err == nil {
			t.Errorf("rateBits(%q) accepted a bad rate", rate)
		}
	}
	if b := tbfBurst(1e9); b != 500000 {
		t.Errorf("tbfBurst(1e9) = %d, want 500000 (4 ms)", b)
	}
	if b := tbfBurst(1e6); b != 32<<10 {
		t.Errorf("tbfBurst(1e6) = %d, want the 32 KiB floor", b)
	}
}

func TestHostsFile(t *testing.T) {
	got, err := hostsFile(map[string]string{"node02": "10.0.0.2", "node01": "fd00::1"})
	want := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfd00::1\tnode01\n10.0.0.2\tnode02\n"
	if err != nil || got != want {
		t.Errorf("hostsFile = %q, %v; want %q", got, err, want)
	}
}
