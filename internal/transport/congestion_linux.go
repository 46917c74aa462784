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
		return fmt.Errorf("the kernel allows this process only %s (net.ipv4.tcp_allowed_congestion_control): %w", listText(congestionList("allowed")), serr)
	case unix.ENOENT:
		return fmt.Errorf("the kernel has only %s (net.ipv4.tcp_available_congestion_control): %w", listText(congestionList("available")), serr)
	}
	return serr
}

// congestionList returns the kernel's congestion controls of kind
// (available, allowed), or nil where the list cannot be read.
func congestionList(kind string) []string {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_" + kind + "_congestion_control")
	return strings.Fields(string(b))
}

// listText is names for an error message: "?" when unknown.
func listText(names []string) string {
	if len(names) == 0 {
		return "?"
	}
	return strings.Join(names, ", ")
}

// CheckCongestion says whether name is a valid TCPOptions.Congestion:
// auto, system, or an algorithm this kernel has registered (one whose
// module is not loaded yet is refused, rather than left to a load that
// only CAP_NET_ADMIN may ask for).
func CheckCongestion(name string) error {
	if !congestionNamed(name) {
		return nil
	}
	if have := congestionList("available"); have != nil && !slices.Contains(have, name) {
		return fmt.Errorf("comm: transport: TCP congestion control %q: want auto, system or one this kernel has (%s; a module adds one: modprobe tcp_%s)", name, listText(have), name)
	}
	return nil
}
