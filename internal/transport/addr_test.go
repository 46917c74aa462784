package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/rendezvous"
)

func TestMatchInterface(t *testing.T) {
	for _, tc := range []struct {
		spec, name string
		want       bool
	}{
		{"eth", "eth0", true},
		{"eth", "eth1", true},
		{"eth", "enp3s0", false},
		{"=eth0", "eth0", true},
		{"=eth0", "eth01", false},
		{"ib,eth", "eth2", true},
		{"^docker,lo", "docker0", false},
		{"^docker,lo", "lo", false},
		{"^docker,lo", "eth0", true},
		{"^=eth0", "eth0", false},
		{"^=eth0", "eth1", true},
		{" eth ", "eth0", true},
	} {
		if got := matchInterface(tc.spec, tc.name); got != tc.want {
			t.Errorf("matchInterface(%q, %q) = %v, want %v", tc.spec, tc.name, got, tc.want)
		}
	}
}

// fakeNetwork replaces the host's interfaces, name resolution and routes
// for one test.
func fakeNetwork(t *testing.T, ifs []netInterface, names map[string][]net.IP, routes map[string]net.IP) {
	t.Helper()
	oldIfs, oldResolve, oldRoute := systemInterfaces, resolveHost, routeAddr
	t.Cleanup(func() { systemInterfaces, resolveHost, routeAddr = oldIfs, oldResolve, oldRoute })
	systemInterfaces = func() ([]netInterface, error) { return ifs, nil }
	resolveHost = func(_ context.Context, host string) ([]net.IP, error) {
		if ip := net.ParseIP(host); ip != nil {
			return []net.IP{ip}, nil
		}
		if ips, ok := names[host]; ok {
			return ips, nil
		}
		return nil, errors.New("no such host")
	}
	routeAddr = func(_ context.Context, ip net.IP) (net.IP, error) {
		if r, ok := routes[ip.String()]; ok {
			return r, nil
		}
		return nil, errors.New("network is unreachable")
	}
}

func TestReachableAddress(t *testing.T) {
	ip := net.ParseIP
	ifs := []netInterface{
		{name: "lo", up: true, addrs: []net.IP{ip("127.0.0.1"), ip("::1")}},
		{name: "docker0", up: true, addrs: []net.IP{ip("172.17.0.1")}},
		{name: "eth0", up: true, addrs: []net.IP{ip("fe80::1"), ip("10.0.0.5"), ip("fd00::5")}},
		{name: "eth1", up: false, addrs: []net.IP{ip("10.1.0.5")}},
		{name: "ib0", up: true, addrs: []net.IP{ip("fd01::5")}},
	}
	names := map[string][]net.IP{
		"master":    {ip("10.0.0.1")},
		"this-host": {ip("127.0.1.1")}, // Debian's own-name entry
		"master6":   {ip("fd00::1")},
	}
	routes := map[string]net.IP{
		"10.0.0.1":  ip("10.0.0.5"),
		"fd00::1":   ip("fd00::5"),
		"10.0.0.5":  ip("10.0.0.5"), // this host's own address
		"127.0.1.1": ip("127.0.0.1"),
	}
	fakeNetwork(t, ifs, names, routes)
	for _, tc := range []struct {
		name       string
		o          TCPOptions
		bind, publ string
		err        string
	}{
		{name: "one host, no master", o: TCPOptions{}, bind: "127.0.0.1", publ: "127.0.0.1"},
		{name: "one host, loopback master", o: TCPOptions{MasterHost: "127.0.0.1"}, bind: "127.0.0.1", publ: "127.0.0.1"},
		{name: "one host, localhost", o: TCPOptions{MasterHost: "localhost"}, bind: "127.0.0.1", publ: "127.0.0.1"},
		{name: "route to the master", o: TCPOptions{MasterHost: "10.0.0.1"}, bind: "10.0.0.5", publ: "10.0.0.5"},
		{name: "master by name", o: TCPOptions{MasterHost: "master"}, bind: "10.0.0.5", publ: "10.0.0.5"},
		{name: "master is this host's address", o: TCPOptions{MasterHost: "10.0.0.5"}, bind: "10.0.0.5", publ: "10.0.0.5"},
		{name: "master's name resolves to 127.0.1.1", o: TCPOptions{MasterHost: "this-host"}, bind: "172.17.0.1", publ: "172.17.0.1"},
		{name: "IPv6 master", o: TCPOptions{MasterHost: "master6"}, bind: "fd00::5", publ: "fd00::5"},
		{name: "store connection's address first", o: TCPOptions{MasterHost: "master", StoreLocalIP: ip("10.0.0.77")}, bind: "10.0.0.77", publ: "10.0.0.77"},
		{name: "store over loopback does not count", o: TCPOptions{MasterHost: "master", StoreLocalIP: ip("127.0.0.1")}, bind: "10.0.0.5", publ: "10.0.0.5"},
		{name: "interface by prefix", o: TCPOptions{MasterHost: "master", Interface: "eth"}, bind: "10.0.0.5", publ: "10.0.0.5"},
		{name: "interface exact", o: TCPOptions{MasterHost: "127.0.0.1", Interface: "=docker0"}, bind: "172.17.0.1", publ: "172.17.0.1"},
		{name: "interface excluded", o: TCPOptions{Interface: "^lo,docker"}, bind: "10.0.0.5", publ: "10.0.0.5"},
		{name: "interface IPv6 for an IPv6 master", o: TCPOptions{MasterHost: "fd00::1", Interface: "eth0"}, bind: "fd00::5", publ: "fd00::5"},
		{name: "IPv6-only interface", o: TCPOptions{Interface: "ib"}, bind: "fd01::5", publ: "fd01::5"},
		{name: "interface down", o: TCPOptions{Interface: "=eth1"}, err: "matches no interface that is up"},
		{name: "no such interface", o: TCPOptions{Interface: "wlan"}, err: "eth0 [fe80::1 10.0.0.5 fd00::5]"},
		{name: "listen host wins", o: TCPOptions{MasterHost: "master", Interface: "eth", ListenHost: "10.0.0.9"}, bind: "10.0.0.9", publ: "10.0.0.9"},
		{name: "all interfaces, publish the route's", o: TCPOptions{MasterHost: "master", ListenHost: "0.0.0.0"}, bind: "0.0.0.0", publ: "10.0.0.5"},
		{name: "advertise host", o: TCPOptions{MasterHost: "master", AdvertiseHost: "203.0.113.9"}, bind: "10.0.0.5", publ: "203.0.113.9"},
		{name: "unresolvable master", o: TCPOptions{MasterHost: "nowhere"}, err: `resolving the master's host "nowhere"`},
		{name: "no route to the master", o: TCPOptions{MasterHost: "192.0.2.1"}, err: "GOCOMM_SOCKET_IFNAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bind, publ, err := tc.o.hosts(context.Background())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("hosts() = %q, %q, %v; want an error containing %q", bind, publ, err, tc.err)
				}
				return
			}
			if err != nil || bind != tc.bind || publ != tc.publ {
				t.Fatalf("hosts() = %q, %q, %v; want %q, %q", bind, publ, err, tc.bind, tc.publ)
			}
		})
	}
}

// connectAs runs ConnectTCP for rank of size with rank 0's address
// already published as addr0, and returns its error and how long it took.
func connectAs(t *testing.T, rank, size int, addr0 string, timeout time.Duration, tweak func(*TCPOptions)) (time.Duration, error) {
	t.Helper()
	store := rendezvous.NewMemStore()
	o := TCPOptions{Rank: rank, Size: size, Prefix: "job", ListenHost: "127.0.0.1", HandshakeTimeout: 2 * time.Second}
	if tweak != nil {
		tweak(&o)
	}
	store.Set(context.Background(), o.addrKey(0), []byte(addr0))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	ep, err := ConnectTCP(ctx, store, o)
	if err == nil {
		ep.Close()
		t.Fatal("ConnectTCP succeeded with a wrong address for rank 0")
	}
	return time.Since(start), err
}

// listen serves every connection to a new listener on 127.0.0.1 with
// serve, closing it when serve returns, until the test ends; it returns
// the listener's address.
func listen(t *testing.T, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// TestConnectNamesWhatAnswered: when a rank's published address is
// answered by the wrong process, the connection phase fails at once with
// an error naming the rank, the address and what answered.
func TestConnectNamesWhatAnswered(t *testing.T) {
	t.Run("another program", func(t *testing.T) {
		addr := listen(t, func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")) })
		took, err := connectAs(t, 1, 2, addr, 20*time.Second, nil)
		for _, want := range []string{"cannot connect to rank 0 at " + addr, "not a gocomm hello", "SSH-2.0"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if took > 5*time.Second {
			t.Errorf("took %v: a wrong answer should end the connection phase at once", took)
		}
	})
	t.Run("a silent program", func(t *testing.T) {
		addr := listen(t, func(c net.Conn) { time.Sleep(5 * time.Second) })
		_, err := connectAs(t, 1, 2, addr, 20*time.Second, nil)
		if !strings.Contains(err.Error(), "nothing answered the handshake in time") {
			t.Errorf("error %q does not say that nothing answered", err)
		}
	})
	t.Run("another rank of the job", func(t *testing.T) {
		other := &handshakeConfig{rank: 1, size: 3, job: jobID("job"), maxFragment: DefaultMaxFragment}
		addr := listen(t, func(c net.Conn) { other.acceptHandshake(c) })
		_, err := connectAs(t, 2, 3, addr, 20*time.Second, nil)
		if !strings.Contains(err.Error(), "rank 1 of this job answered instead") {
			t.Errorf("error %q does not name the rank that answered", err)
		}
	})
	t.Run("another job", func(t *testing.T) {
		other := &handshakeConfig{rank: 0, size: 2, job: jobID("another job"), maxFragment: DefaultMaxFragment}
		addr := listen(t, func(c net.Conn) { other.acceptHandshake(c) })
		_, err := connectAs(t, 1, 2, addr, 20*time.Second, nil)
		if !strings.Contains(err.Error(), "a rank of another job answered") {
			t.Errorf("error %q does not say another job answered", err)
		}
	})
	t.Run("nothing listens", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		// This rank publishes a routable address, rank 0 a loopback one: the
		// error says what to set on rank 0's host.
		took, err := connectAs(t, 1, 2, addr, 30*time.Second, func(o *TCPOptions) { o.AdvertiseHost = "10.9.9.9" })
		for _, want := range []string{"rank 0 at " + addr, "nothing listens there", "published a loopback address", "GOCOMM_SOCKET_IFNAME"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if took < refusedGrace || took > refusedGrace+5*time.Second {
			t.Errorf("took %v, want about refusedGrace (%v)", took, refusedGrace)
		}
	})
}

// TestConnectHonoursTimeout: a published address that cannot be reached
// fails the connection phase by the time ctx ends (sooner where the
// network refuses it), naming the rank and address. The multi-host tests
// show a dial that hangs (a host whose link is down) end at the timeout.
func TestConnectHonoursTimeout(t *testing.T) {
	const timeout = 3 * time.Second
	check := func(t *testing.T, addr string, tweak func(*TCPOptions)) {
		took, err := connectAs(t, 1, 2, addr, timeout, tweak)
		for _, want := range []string{"rank 0", addr} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if took > timeout+2*time.Second {
			t.Errorf("took %v with a timeout of %v", took, timeout)
		}
	}
	// TEST-NET-1: never routed. Where a route to it exists the dial hangs
	// until the timeout, elsewhere it fails at once: either way the error
	// names the address.
	t.Run("unroutable", func(t *testing.T) { check(t, "192.0.2.1:9", nil) })
	// A peer that accepts and never answers, with a handshake timeout
	// longer than the phase: the phase ends mid-dial on every machine.
	t.Run("silent", func(t *testing.T) {
		addr := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		check(t, addr, func(o *TCPOptions) { o.HandshakeTimeout = time.Minute })
	})
	// Rank 0 never published an address: the error says so.
	t.Run("unpublished", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		o := TCPOptions{Rank: 1, Size: 2, Prefix: "job", ListenHost: "127.0.0.1"}
		ep, err := ConnectTCP(ctx, rendezvous.NewMemStore(), o)
		if err == nil {
			ep.Close()
			t.Fatal("ConnectTCP succeeded without rank 0")
		}
		if want := "rank 0 never published its address"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	})
}
