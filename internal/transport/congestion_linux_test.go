//go:build linux && !gocomm_portable

package transport

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// congestion returns the congestion control of the socket behind rc.
func congestion(rc syscall.RawConn) (string, error) {
	var name string
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		name, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		return "", err
	}
	return strings.TrimRight(name, "\x00"), gerr
}

// connCongestion returns the congestion control of each of e's
// connections.
func connCongestion(t *testing.T, e *TCP) []string {
	t.Helper()
	var names []string
	for _, c := range e.conns {
		if c == nil {
			continue
		}
		rc, err := c.conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		name, err := congestion(rc)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// TestTCPCongestion: connections within a host run reno by default, the
// system's choice with "system", and a named algorithm when asked; a name
// the kernel lacks fails the connection phase saying what it has.
func TestTCPCongestion(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skipf("no /proc/sys/net/ipv4/tcp_congestion_control to compare with: %v", err)
	}
	system := strings.TrimSpace(string(b))
	for _, c := range []struct{ opt, want string }{
		{"", "reno"}, {"auto", "reno"}, {"system", system}, {"reno", "reno"}, {system, system},
	} {
		eps, err := connectTCPWorld(3, func(o *TCPOptions) { o.Congestion = c.opt })
		if err != nil {
			t.Fatalf("Congestion %q: %v", c.opt, err)
		}
		for r, e := range eps {
			for _, got := range connCongestion(t, e) {
				if got != c.want {
					t.Errorf("Congestion %q: rank %d has a connection with %q, want %q", c.opt, r, got, c.want)
				}
			}
		}
		for _, e := range eps {
			e.Close()
		}
	}

	_, err = connectTCPWorld(2, func(o *TCPOptions) { o.Congestion = "warp9" })
	if err == nil || !strings.Contains(err.Error(), `"warp9"`) || !strings.Contains(err.Error(), "reno") {
		t.Errorf("Congestion warp9: %v, want an error naming it and the kernel's algorithms", err)
	}
}

func TestSameHost(t *testing.T) {
	for _, c := range []struct {
		local, remote string
		want          bool
	}{
		{"127.0.0.1", "127.0.0.1", true}, {"10.0.0.5", "127.0.0.2", true}, {"10.0.0.5", "10.0.0.5", true},
		{"::1", "::1", true}, {"10.77.0.1", "10.77.0.2", false}, {"fd00::1", "fd00::2", false},
	} {
		l, r := &net.TCPAddr{IP: net.ParseIP(c.local)}, &net.TCPAddr{IP: net.ParseIP(c.remote)}
		if got := sameHostAddrs(l, r); got != c.want {
			t.Errorf("%s -> %s: same host %v, want %v", c.local, c.remote, got, c.want)
		}
	}
}
