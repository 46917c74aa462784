package transport

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// Choosing the address a rank binds and publishes. Peers on other hosts
// must be able to dial it, so it is never loopback unless the whole job is
// on one host; see TCPOptions.hosts for the order of the rules.

// netInterface is what address selection needs of a network interface.
type netInterface struct {
	name  string
	up    bool
	addrs []net.IP
}

// systemInterfaces lists this host's interfaces; a variable for tests.
var systemInterfaces = func() ([]netInterface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]netInterface, 0, len(ifs))
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		ni := netInterface{name: i.Name, up: i.Flags&net.FlagUp != 0}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				ni.addrs = append(ni.addrs, ipn.IP)
			}
		}
		out = append(out, ni)
	}
	return out, nil
}

// usable reports whether peers could dial ip: not link-local (it would
// need a zone) and not unspecified or multicast.
func usable(ip net.IP) bool {
	return ip != nil && !ip.IsUnspecified() && !ip.IsMulticast() &&
		!ip.IsLinkLocalUnicast() && !ip.IsLinkLocalMulticast()
}

// matchInterface reports whether the interface name matches spec, a
// comma-separated list in the form of NCCL_SOCKET_IFNAME and
// GLOO_SOCKET_IFNAME: "eth" matches eth0, eth1...; "=eth0" only eth0; a
// leading "^" turns the whole list into exclusions ("^docker,lo").
func matchInterface(spec, name string) bool {
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		var hit bool
		if exact, ok := strings.CutPrefix(p, "="); ok {
			hit = name == exact
		} else {
			hit = strings.HasPrefix(name, p)
		}
		if hit {
			return !exclude
		}
	}
	return exclude
}

// interfaceAddr picks the address of the first up interface matching spec
// (see matchInterface), IPv4 before IPv6 unless prefer6. The error lists
// the interfaces there are.
func interfaceAddr(spec string, prefer6 bool) (net.IP, error) {
	ifs, err := systemInterfaces()
	if err != nil {
		return nil, fmt.Errorf("comm: transport: listing network interfaces: %w", err)
	}
	var first4, first6 net.IP
	for _, i := range ifs {
		if !i.up || !matchInterface(spec, i.name) {
			continue
		}
		for _, ip := range i.addrs {
			switch {
			case !usable(ip):
			case ip.To4() != nil && first4 == nil:
				first4 = ip
			case ip.To4() == nil && first6 == nil:
				first6 = ip
			}
		}
	}
	if prefer6 && first6 != nil {
		return first6, nil
	}
	if first4 != nil {
		return first4, nil
	}
	if first6 != nil {
		return first6, nil
	}
	return nil, fmt.Errorf("comm: transport: interface %q (GOCOMM_SOCKET_IFNAME) matches no interface that is up with a usable address; this host has %s", spec, describeInterfaces(ifs))
}

func describeInterfaces(ifs []netInterface) string {
	var parts []string
	for _, i := range ifs {
		var addrs []string
		for _, ip := range i.addrs {
			addrs = append(addrs, ip.String())
		}
		state := ""
		if !i.up {
			state = " (down)"
		}
		parts = append(parts, fmt.Sprintf("%s%s [%s]", i.name, state, strings.Join(addrs, " ")))
	}
	if len(parts) == 0 {
		return "no interfaces"
	}
	return strings.Join(parts, ", ")
}

// externalAddr is the first usable address of an up, non-loopback
// interface (IPv4 first), or nil when the host has none.
func externalAddr() net.IP {
	ifs, err := systemInterfaces()
	if err != nil {
		return nil
	}
	var first6 net.IP
	for _, i := range ifs {
		if !i.up {
			continue
		}
		for _, ip := range i.addrs {
			if !usable(ip) || ip.IsLoopback() {
				continue
			}
			if ip.To4() != nil {
				return ip
			}
			if first6 == nil {
				first6 = ip
			}
		}
	}
	return first6
}

// resolveHost returns host's addresses (host itself when it is an IP).
var resolveHost = func(ctx context.Context, host string) ([]net.IP, error) {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}, nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	return ips, nil
}

// routeAddr is the local address this host sends from to reach ip.
// Connecting a UDP socket sends nothing; it only picks the route.
var routeAddr = func(ctx context.Context, ip net.IP) (net.IP, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", net.JoinHostPort(ip.String(), "9"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

// hosts resolves the host to bind and the host to publish. ListenHost
// (GOCOMM_SOCKET_HOST) is bound as given, and published unless it is the
// unspecified address (0.0.0.0, ::), for which reachableIP picks what to
// publish; AdvertiseHost, if set, is published instead. Otherwise the rank
// binds and publishes reachableIP.
func (o *TCPOptions) hosts(ctx context.Context) (bind, advertise string, err error) {
	if o.ListenHost != "" && o.AdvertiseHost != "" {
		return o.ListenHost, o.AdvertiseHost, nil
	}
	if ip := net.ParseIP(o.ListenHost); o.ListenHost != "" && (ip == nil || !ip.IsUnspecified()) {
		return o.ListenHost, o.ListenHost, nil
	}
	ip, err := o.reachableIP(ctx)
	if err != nil {
		return "", "", err
	}
	bind, advertise = ip.String(), ip.String()
	if o.ListenHost != "" {
		bind = o.ListenHost
	}
	if o.AdvertiseHost != "" {
		advertise = o.AdvertiseHost
	}
	return bind, advertise, nil
}

// reachableIP is the address of this host that the job's other ranks can
// dial, by the first rule that applies:
//
//  1. Interface (GOCOMM_SOCKET_IFNAME): that interface's address.
//  2. StoreLocalIP, the local end of this rank's connection to the store,
//     unless it is loopback: the address the store's host sees it at.
//  3. No MasterHost, or a literal loopback one (127.0.0.1, ::1,
//     localhost): a one-host job, 127.0.0.1.
//  4. The local address of the route to MasterHost, unless that is
//     loopback.
//  5. MasterHost names this very host (say its name resolves to 127.0.1.1,
//     as Debian sets it up), yet ranks on other hosts may come: this
//     host's first external address (127.0.0.1 only if it has none).
func (o *TCPOptions) reachableIP(ctx context.Context) (net.IP, error) {
	if o.Interface != "" {
		prefer6 := false
		if ip := net.ParseIP(o.MasterHost); ip != nil {
			prefer6 = ip.To4() == nil
		}
		return interfaceAddr(o.Interface, prefer6)
	}
	if ip := o.StoreLocalIP; usable(ip) && !ip.IsLoopback() {
		return ip, nil
	}
	if o.MasterHost == "" || isLoopbackHost(o.MasterHost) {
		return net.IPv4(127, 0, 0, 1), nil
	}
	ips, err := resolveHost(ctx, o.MasterHost)
	if err != nil {
		return nil, fmt.Errorf("comm: transport: resolving the master's host %q to find this rank's address (or set GOCOMM_SOCKET_IFNAME or GOCOMM_SOCKET_HOST): %w", o.MasterHost, err)
	}
	for _, ip := range ips {
		if ip.IsLoopback() {
			continue
		}
		local, err := routeAddr(ctx, ip)
		if err != nil {
			return nil, fmt.Errorf("comm: transport: finding the address that reaches %s (%s) (or set GOCOMM_SOCKET_IFNAME or GOCOMM_SOCKET_HOST): %w", o.MasterHost, ip, err)
		}
		if !local.IsLoopback() {
			return local, nil
		}
	}
	if ext := externalAddr(); ext != nil {
		return ext, nil
	}
	return net.IPv4(127, 0, 0, 1), nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackAddr reports whether a published "host:port" is on loopback.
func isLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopbackHost(h)
}
