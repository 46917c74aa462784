//go:build linux && !gocomm_portable

package transport

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setCongestion sets the congestion control of the socket behind rc.
func setCongestion(rc syscall.RawConn, name string) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
	}); err != nil {
		return err
	}
	switch serr {
	case nil:
		return nil
	case unix.EPERM:
		return fmt.Errorf("the kernel allows this process only %s (net.ipv4.tcp_allowed_congestion_control): %w", congestionList("allowed"), serr)
	case unix.ENOENT:
		return fmt.Errorf("the kernel has only %s (net.ipv4.tcp_available_congestion_control): %w", congestionList("available"), serr)
	}
	return serr
}

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

// congestionList returns the kernel's list of congestion controls of
// kind (available, allowed) as text, or "?" where it cannot be read.
func congestionList(kind string) string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_" + kind + "_congestion_control")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b)), ", ")
}

// CheckCongestion says whether name is a valid TCPOptions.Congestion:
// auto, system, or an algorithm this kernel has registered (one whose
// module is not loaded yet is refused, rather than left to a load that
// only CAP_NET_ADMIN may ask for).
func CheckCongestion(name string) error {
	if !congestionNamed(name) {
		return nil
	}
	have := congestionList("available")
	if have != "?" && !slices.Contains(strings.Split(have, ", "), name) {
		return fmt.Errorf("comm: transport: TCP congestion control %q: want auto, system or one this kernel has (%s; a module adds one: modprobe tcp_%s)", name, have, name)
	}
	return nil
}
