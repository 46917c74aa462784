package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrUnavailable is wrapped by the error of Available (and of New) when
// network namespaces cannot be made here: not Linux, not root, no `ip`
// command, or the kernel refuses.
var ErrUnavailable = errors.New("comm: netns: network namespaces unavailable")

// maxHosts bounds Options.Hosts: host addresses are .10 to .250 of one /24.
const maxHosts = 240

// Options says what New builds. Hosts must be set; the rest may stay zero.
type Options struct {
	Hosts int  // number of hosts, 1 to 240
	IPv6  bool // also give every host an IPv6 ULA address (fd00:...::N/64) on the same link
}

// validate reports what to fix in opts, or nil.
func (o Options) validate() error {
	if o.Hosts < 1 || o.Hosts > maxHosts {
		return fmt.Errorf("comm: netns: Options.Hosts is %d; set it to 1..%d", o.Hosts, maxHosts)
	}
	return nil
}

// Network is a set of hosts joined by one bridge, made by New. Hosts and
// Close are safe for concurrent use; Close must be called once the test is
// done (calling it again is harmless).
type Network struct {
	seq    uint64 // the per-process counter in every name
	prefix string // "gocomm-<pid>-<seq>"
	sw     string // the switch namespace, holding bridge br0 and one port per host
	hosts  []*Host

	mu       sync.Mutex // protects following
	made     []string   // namespaces made so far, switch first
	closed   bool
	closeErr error
}

// Host is one simulated machine: a network namespace with lo and one link.
// Its fields are fixed once New returns; its methods are safe for concurrent
// use but the network changes they make (SetLink, Shape, AddDummy, SetHosts)
// are seen by every later caller.
type Host struct {
	Name  string // namespace name, e.g. "gocomm-<pid>-<k>-h0"
	Index int    // position in Network.Hosts
	Addr  string // IPv4 address on the shared link, e.g. "10.213.7.10"
	Addr6 string // IPv6 address when Options.IPv6, else ""
	Link  string // the host's interface name inside its namespace ("eth0")

	nw   *Network
	port string // the switch-side end of the host's link, in nw.sw
}

// Hosts returns the hosts in index order. The slice is the caller's to keep;
// the Hosts it points to are shared with the Network.
func (n *Network) Hosts() []*Host {
	return append([]*Host(nil), n.hosts...)
}

// etcNetnsDir holds per-namespace files that `ip netns exec` binds over /etc.
const etcNetnsDir = "/etc/netns"

// namePrefix is the start of every name this package gives a namespace.
const namePrefix = "gocomm-"

// nsPrefix returns the name prefix of network number seq in process pid.
func nsPrefix(pid int, seq uint64) string {
	return fmt.Sprintf("%s%d-%d", namePrefix, pid, seq)
}

// ownerPID returns the pid embedded in a namespace name made by this
// package ("gocomm-<pid>-..."), or ok false for any other name.
func ownerPID(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, namePrefix)
	if !found {
		return 0, false
	}
	digits, _, found := strings.Cut(rest, "-")
	if !found {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// hostAddrs returns host i's IPv4 and IPv6 addresses (without prefix length)
// in network number seq. Networks are isolated from each other, so equal
// addresses would not clash; seq only makes logs easier to read.
func hostAddrs(seq uint64, i int) (v4, v6 string) {
	third := seq % 256
	v4 = fmt.Sprintf("10.213.%d.%d", third, 10+i)
	v6 = fmt.Sprintf("fd00:213:0:%x::%x", third, 10+i)
	return v4, v6
}

// rateBits parses a tc rate ("1gbit", "100mbit", "500kbit", "8000bit",
// "10mbps", "1.5gbit") into bits per second.
func rateBits(rate string) (float64, error) {
	s := strings.ToLower(strings.TrimSpace(rate))
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("comm: netns: rate %q: want a positive number and a unit such as \"1gbit\" or \"100mbit\"", rate)
	}
	mult := map[string]float64{
		"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
		"bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("comm: netns: rate %q: unit %q unknown; use bit, kbit, mbit, gbit, tbit or bps, kbps, mbps, gbps, tbps", rate, unit)
	}
	return v * mult, nil
}

// tbfBurst returns the token-bucket size in bytes for a rate in bits per
// second: 4 ms of traffic, at least 32 KiB so GSO-sized packets pass.
func tbfBurst(bits float64) int {
	b := int(bits / 8 * 0.004)
	return max(b, 32<<10)
}

// hostsFile returns the text of an /etc/hosts mapping each name to its
// address, after the localhost lines, sorted by name for a stable file.
func hostsFile(names map[string]string) (string, error) {
	keys := make([]string, 0, len(names))
	for name, addr := range names {
		if name == "" || strings.ContainsAny(name, " \t\n#") {
			return "", fmt.Errorf("comm: netns: host name %q: want a non-empty name without spaces or '#'", name)
		}
		if _, err := netip.ParseAddr(addr); err != nil {
			return "", fmt.Errorf("comm: netns: address %q for %q: want an IP address: %w", addr, name, err)
		}
		keys = append(keys, name)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, name := range keys {
		fmt.Fprintf(&b, "%s\t%s\n", names[name], name)
	}
	return b.String(), nil
}

// validLinkName reports what is wrong with an interface name, or nil.
func validLinkName(name string) error {
	if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ \t\n:") || name == "." || name == ".." {
		return fmt.Errorf("comm: netns: interface name %q: want 1 to 15 characters without '/', ':' or spaces", name)
	}
	return nil
}

// validPrefix reports what is wrong with an address in CIDR form, or nil.
func validPrefix(cidr string) error {
	if _, err := netip.ParsePrefix(cidr); err != nil {
		return fmt.Errorf("comm: netns: address %q: want an address with prefix length such as \"10.99.0.2/24\": %w", cidr, err)
	}
	return nil
}
