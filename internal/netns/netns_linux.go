//go:build linux

package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by Host methods called after Network.Close.
var ErrClosed = errors.New("comm: netns: network closed")

const (
	netnsRunDir = "/var/run/netns" // where `ip netns add` mounts namespaces
	bridgeName  = "br0"
	hostLink    = "eth0"

	// reachTimeout bounds New's wait for every host to reach every other.
	reachTimeout = 10 * time.Second
)

var (
	// seqCounter numbers the Networks of this process.
	seqCounter atomic.Uint64
	// linkCounter numbers the spare veth ends AddDummy makes when the
	// kernel has no dummy driver.
	linkCounter atomic.Uint64

	// addMu serialises `ip netns add` within the process: the first call
	// makes /var/run/netns a shared mount, and concurrent first calls race.
	addMu sync.Mutex

	availOnce sync.Once
	availErr  error
)

// Available reports why network namespaces cannot be made here (not root,
// no `ip` command, the kernel or a sandbox refuses), as an error wrapping
// ErrUnavailable, or nil. The first call probes by making and removing one
// namespace with a bridge; later calls return the cached answer. Safe for
// concurrent use.
func Available() error {
	availOnce.Do(func() { availErr = probe() })
	return availErr
}

// probe makes and removes one namespace holding a bridge and a veth pair.
func probe() error {
	if euid := os.Geteuid(); euid != 0 {
		return fmt.Errorf("%w: needs root, running as euid %d", ErrUnavailable, euid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no `ip` command (install iproute2): %v", ErrUnavailable, err)
	}
	name := fmt.Sprintf("%s-probe", nsPrefix(os.Getpid(), seqCounter.Add(1)))
	if err := addNamespace(name); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer func() { _ = ip("netns", "del", name) }()
	if err := ip("-n", name, "link", "add", bridgeName, "type", "bridge"); err != nil {
		return fmt.Errorf("%w: no bridge support: %v", ErrUnavailable, err)
	}
	if err := ip("-n", name, "link", "add", "pa", "type", "veth", "peer", "name", "pb"); err != nil {
		return fmt.Errorf("%w: no veth support: %v", ErrUnavailable, err)
	}
	return nil
}

// run runs a command and returns its stdout; the error says which command
// failed and carries its stderr.
func run(name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("comm: netns: %s %s: %w: %s",
			name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// ip runs the ip command with args.
func ip(args ...string) error {
	_, err := run("ip", args...)
	return err
}

// addNamespace runs `ip netns add name`, serialised within the process.
func addNamespace(name string) error {
	addMu.Lock()
	defer addMu.Unlock()
	return ip("netns", "add", name)
}

// New builds opts.Hosts namespaces, each with lo up and one veth ("eth0")
// whose other end sits on a bridge inside a separate switch namespace,
// addresses on one /24 (and /64 with opts.IPv6, added without duplicate
// address detection), all links up. It returns once every host reaches every
// other host's addresses over TCP (a refused connection counts: the packet
// got there), or fails after 10 s. On any failure it removes what it made.
//
// Before building, New removes namespaces and /etc/netns directories left
// by earlier processes whose pid is no longer alive. The caller owns the
// Network and must Close it. Safe for concurrent use.
func New(opts Options) (*Network, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	removeLeftovers()
	seq := seqCounter.Add(1)
	n := &Network{seq: seq, prefix: nsPrefix(os.Getpid(), seq)}
	if err := n.build(opts); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	if err := n.waitReachable(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// build makes the switch and the hosts, recording each namespace in n.made
// as soon as it exists so Close removes it.
func (n *Network) build(opts Options) error {
	n.sw = n.prefix + "-sw"
	if err := n.addNamespace(n.sw); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", n.sw, "link", "set", "lo", "up"},
		{"-n", n.sw, "link", "add", bridgeName, "type", "bridge", "stp_state", "0", "mcast_snooping", "0"},
		{"-n", n.sw, "link", "set", bridgeName, "up"},
	}
	if err := ipSteps(steps); err != nil {
		return err
	}
	for i := range opts.Hosts {
		h := &Host{Name: fmt.Sprintf("%s-h%d", n.prefix, i), Index: i, Link: hostLink, nw: n, port: fmt.Sprintf("p%d", i)}
		h.Addr, h.Addr6 = hostAddrs(n.seq, i)
		if !opts.IPv6 {
			h.Addr6 = ""
		}
		if err := n.addNamespace(h.Name); err != nil {
			return err
		}
		n.hosts = append(n.hosts, h)
		steps := [][]string{
			{"-n", h.Name, "link", "set", "lo", "up"},
			{"-n", n.sw, "link", "add", h.port, "type", "veth", "peer", "name", hostLink, "netns", h.Name},
			{"-n", n.sw, "link", "set", h.port, "master", bridgeName},
			{"-n", n.sw, "link", "set", h.port, "up"},
			{"-n", h.Name, "addr", "add", h.Addr + "/24", "dev", hostLink},
		}
		if h.Addr6 != "" {
			steps = append(steps, []string{"-n", h.Name, "addr", "add", h.Addr6 + "/64", "dev", hostLink, "nodad"})
		}
		steps = append(steps, []string{"-n", h.Name, "link", "set", hostLink, "up"})
		if err := ipSteps(steps); err != nil {
			return err
		}
	}
	return nil
}

// addNamespace makes namespace name and records it for Close.
func (n *Network) addNamespace(name string) error {
	if err := addNamespace(name); err != nil {
		return err
	}
	n.mu.Lock()
	n.made = append(n.made, name)
	n.mu.Unlock()
	return nil
}

// ipSteps runs ip once per step, stopping at the first failure.
func ipSteps(steps [][]string) error {
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// waitReachable returns once every host reaches every host's addresses
// (its own included), or an error naming the first pair that did not
// within reachTimeout.
func (n *Network) waitReachable() error {
	deadline := time.Now().Add(reachTimeout)
	errs := make([]error, len(n.hosts))
	var wg sync.WaitGroup
	for i, h := range n.hosts {
		wg.Go(func() { errs[i] = inNamespace(h.Name, func() error { return n.probeFrom(h, deadline) }) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// probeFrom dials every host's addresses from the calling thread's
// namespace until each answers (a refused connection is an answer).
func (n *Network) probeFrom(from *Host, deadline time.Time) error {
	for _, to := range n.hosts {
		for _, addr := range []string{to.Addr, to.Addr6} {
			if addr == "" {
				continue
			}
			if err := awaitAnswer(net.JoinHostPort(addr, "9"), deadline); err != nil {
				return fmt.Errorf("comm: netns: host %d (%s) cannot reach host %d at %s: %w", from.Index, from.Name, to.Index, addr, err)
			}
		}
	}
	return nil
}

// awaitAnswer dials addr until it accepts or refuses, or deadline passes.
func awaitAnswer(addr string, deadline time.Time) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
		if err == nil {
			return c.Close()
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inNamespace runs fn on a fresh OS thread moved into namespace name. The
// goroutine never unlocks the thread, so the Go runtime ends the thread when
// fn returns and no other goroutine ever runs in that namespace.
func inNamespace(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(filepath.Join(netnsRunDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("comm: netns: open namespace %s: %w", name, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("comm: netns: enter namespace %s: %w", name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// removeLeftovers removes namespaces and /etc/netns directories named by
// this package for a process that is no longer alive. It is best effort:
// another process may be removing the same leftovers at the same time.
func removeLeftovers() {
	if out, err := run("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) > 0 && isStale(fields[0]) {
				_ = ip("netns", "del", fields[0])
			}
		}
	}
	if entries, err := os.ReadDir(etcNetnsDir); err == nil {
		for _, e := range entries {
			if isStale(e.Name()) {
				_ = os.RemoveAll(filepath.Join(etcNetnsDir, e.Name()))
			}
		}
	}
}

// isStale reports whether name was made by this package in a process that
// is no longer alive.
func isStale(name string) bool {
	pid, ok := ownerPID(name)
	if !ok || pid == os.Getpid() {
		return false
	}
	return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// Close removes every namespace of the network (hosts and switch), which
// removes their links, and every /etc/netns/<name> directory written for
// them. It returns the joined errors of what it could not remove. Safe to
// call twice and concurrently; later calls return the first call's result.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.closeErr
	}
	n.closed = true
	var errs []error
	for i := len(n.made) - 1; i >= 0; i-- {
		name := n.made[i]
		if err := ip("netns", "del", name); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(filepath.Join(etcNetnsDir, name)); err != nil {
			errs = append(errs, fmt.Errorf("comm: netns: %w", err))
		}
	}
	n.closeErr = errors.Join(errs...)
	return n.closeErr
}

// isClosed reports whether Close has been called.
func (n *Network) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// Run runs name with args inside host number host and returns its standard
// output; on failure the error carries its standard error. For short
// commands; the output buffer is the caller's. Safe for concurrent use.
func (n *Network) Run(ctx context.Context, host int, name string, args ...string) ([]byte, error) {
	if host < 0 || host >= len(n.hosts) {
		return nil, fmt.Errorf("comm: netns: host %d: want 0..%d", host, len(n.hosts)-1)
	}
	if n.isClosed() {
		return nil, ErrClosed
	}
	var stdout, stderr bytes.Buffer
	cmd := n.hosts[host].Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("comm: netns: host %d: %s %s: %w: %s",
			host, name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Command returns a command that runs name with args inside the host's
// namespace (`ip netns exec <ns> name args...`, which also bind-mounts
// /etc/netns/<ns>/* over /etc). Its environment is the caller's unless the
// caller sets cmd.Env. ctx kills the program (ip execs it, so the process
// is the program itself). The caller owns the command.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// SetLink takes the host's link down (false) or up (true) on the switch
// side, as a pulled cable or a dead host does to its peers: the host's eth0
// loses carrier and the bridge stops forwarding to it. Addresses stay.
func (h *Host) SetLink(up bool) error {
	if h.nw.isClosed() {
		return ErrClosed
	}
	state := "down"
	if up {
		state = "up"
	}
	return ip("-n", h.nw.sw, "link", "set", h.port, state)
}

// Shape limits the host's egress and ingress on its link to rate, a tc rate
// such as "1gbit" or "100mbit", with a tbf qdisc on each end of the link
// (4 ms of burst, at least 32 KiB). It replaces an earlier Shape. Needs the
// `tc` command. This kernel has tbf but no netem, so no added delay.
func (h *Host) Shape(rate string) error {
	bits, err := rateBits(rate)
	if err != nil {
		return err
	}
	if h.nw.isClosed() {
		return ErrClosed
	}
	tbf := []string{"root", "tbf", "rate", strconv.FormatFloat(bits, 'f', 0, 64) + "bit",
		"burst", strconv.Itoa(tbfBurst(bits)), "latency", "100ms"}
	if _, err := run("tc", append([]string{"-n", h.Name, "qdisc", "replace", "dev", hostLink}, tbf...)...); err != nil {
		return err
	}
	_, err = run("tc", append([]string{"-n", h.nw.sw, "qdisc", "replace", "dev", h.port}, tbf...)...)
	return err
}

// AddDummy adds an interface called name holding cidr (e.g. "10.99.0.2/24")
// in the host, for an address no other host can reach. It is a dummy
// interface, or where the kernel has no dummy driver one end of a veth pair
// whose other end also stays in the host.
func (h *Host) AddDummy(name, cidr string) error {
	if err := validLinkName(name); err != nil {
		return err
	}
	if err := validPrefix(cidr); err != nil {
		return err
	}
	if h.nw.isClosed() {
		return ErrClosed
	}
	steps := [][]string{{"-n", h.Name, "link", "add", name, "type", "dummy"}}
	if err := ip(steps[0]...); err != nil {
		peer := fmt.Sprintf("gcdp%d", linkCounter.Add(1))
		if err2 := ip("-n", h.Name, "link", "add", name, "type", "veth", "peer", "name", peer); err2 != nil {
			return errors.Join(err, err2)
		}
		steps = [][]string{{"-n", h.Name, "link", "set", peer, "up"}}
	} else {
		steps = nil
	}
	steps = append(steps,
		[]string{"-n", h.Name, "addr", "add", cidr, "dev", name, "nodad"},
		[]string{"-n", h.Name, "link", "set", name, "up"})
	return ipSteps(steps)
}

// SetHosts writes /etc/netns/<ns>/hosts, so programs run with Command
// resolve these names: localhost lines, then one line per name mapping it
// to its address (e.g. {"node01": "10.213.7.10"}). It replaces an earlier
// SetHosts; Close removes the file. The map is only read.
func (h *Host) SetHosts(names map[string]string) error {
	text, err := hostsFile(names)
	if err != nil {
		return err
	}
	if h.nw.isClosed() {
		return ErrClosed
	}
	dir := filepath.Join(etcNetnsDir, h.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("comm: netns: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(text), 0o644); err != nil {
		return fmt.Errorf("comm: netns: %w", err)
	}
	return nil
}
