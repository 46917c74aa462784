package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AddrStore is the part of a rendezvous store that ConnectTCP needs; a
// rendezvous.Store satisfies it. Get blocks until the key is set or ctx
// ends.
type AddrStore interface {
	Set(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// TCPOptions configures ConnectTCP. Zero values of the optional fields
// select the defaults documented on each.
type TCPOptions struct {
	Rank, Size int // this rank and the world size; 0 <= Rank < Size

	// Prefix namespaces the store keys (a job or world id): the address of
	// rank r is published under Prefix + "/addr/<r>". Ranks of different
	// prefixes refuse each other's connections.
	Prefix string

	// ListenHost is the host or IP to bind (the port is always chosen by
	// the kernel) and publish (GOCOMM_SOCKET_HOST). Default: an address
	// the other ranks can reach, chosen from Interface, MasterHost and
	// StoreLocalIP (see reachableIP): 127.0.0.1 only for a job on one
	// host.
	ListenHost string
	// Interface picks the address to bind and publish by interface name
	// (GOCOMM_SOCKET_IFNAME): "eth" matches eth0, eth1...; "=eth0" exactly
	// eth0; "^docker,lo" any but those; IPv4 first.
	Interface string
	// AdvertiseHost is the host published for peers to dial, when it
	// differs from the one bound (NAT). Default: the bound address.
	AdvertiseHost string
	// MasterHost is the store's host (MASTER_ADDR) and StoreLocalIP the
	// local address of this rank's connection to the store, if it has one;
	// they guide the default address.
	MasterHost   string
	StoreLocalIP net.IP

	// Secret is the shared secret authenticating every connection
	// (HMAC-SHA256 challenge-response). Empty still checks identity.
	Secret []byte

	// MaxFragment is the largest data fragment sent or accepted, in bytes
	// (default DefaultMaxFragment, at most 1 GiB). Longer messages are
	// split. Each side sends fragments no larger than the other accepts.
	MaxFragment int
	// HandshakeTimeout bounds one connection's handshake (default 10s).
	HandshakeTimeout time.Duration
	// CloseTimeout bounds the goodbye and abort writes and how long Close
	// waits for peers to hang up (default 2s).
	CloseTimeout time.Duration
	// SocketBuffer sets SO_SNDBUF and SO_RCVBUF when > 0. Default 0 keeps
	// the kernel's auto-tuning: on Linux an explicit size turns receive
	// auto-tuning off and is capped by net.core.rmem_max/wmem_max, while
	// auto-tuning grows buffers up to tcp_rmem/tcp_wmem's maximum.
	SocketBuffer int
	// KeepAlive is the TCP keep-alive idle time and probe interval (3
	// probes), which bounds how long a silently vanished host goes
	// unnoticed; default 5s, negative disables.
	KeepAlive time.Duration
	// ReadSpin is how long a connection's reader keeps polling the socket
	// after it found it empty before it sleeps in the network poller
	// (default 200µs; negative: never). Polling trades a CPU for latency:
	// the Hybrid endpoint turns it off where the host's ranks outnumber
	// its CPUs. Linux only: elsewhere, and under -tags gocomm_portable,
	// readers park at once and ReadSpin has no effect.
	ReadSpin time.Duration
	// Congestion is the TCP congestion control of the data connections
	// (Linux only): "" or "auto" (the default): reno for a connection whose
	// two ends are on one host (a loopback address, or the same address
	// at both ends), the system's choice (net.ipv4.tcp_congestion_control)
	// for the others; "system": the system's choice for every connection;
	// or an algorithm the kernel has (net.ipv4.tcp_available_congestion_control:
	// reno, cubic, bbr...) for every connection, which the kernel may
	// refuse to a process without CAP_NET_ADMIN unless
	// net.ipv4.tcp_allowed_congestion_control lists it (reno is always
	// allowed). Within one host there is no network to probe: bbr's pacing
	// and cubic's delay-based exit from slow start only cost, and on hosts
	// whose default is bbr, large collectives within the host ran several
	// times faster with reno (see docs/tuning.md, GOCOMM_TCP_CONGESTION).
	Congestion string

	hooks *tcpHooks // tests only
}

// tcpHooks let in-package tests observe connection set-up.
type tcpHooks struct {
	accepted func(peer int) // after an accepted peer is admitted
	refused  func(err error)
}

func (o TCPOptions) withDefaults() (TCPOptions, error) {
	if o.Size < 1 || o.Size > 1<<24 {
		return o, fmt.Errorf("comm: transport: world size %d out of range", o.Size)
	}
	if o.Rank < 0 || o.Rank >= o.Size {
		return o, fmt.Errorf("comm: transport: rank %d not in [0, %d)", o.Rank, o.Size)
	}
	if o.MaxFragment == 0 {
		o.MaxFragment = DefaultMaxFragment
	}
	if o.MaxFragment < 1 || o.MaxFragment > maxFragmentLimit {
		return o, fmt.Errorf("comm: transport: MaxFragment %d not in [1, %d]", o.MaxFragment, maxFragmentLimit)
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 2 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 5 * time.Second
	}
	if o.ReadSpin == 0 {
		o.ReadSpin = defaultReadSpin
	}
	o.ReadSpin = max(o.ReadSpin, 0)
	if err := CheckCongestion(o.Congestion); err != nil {
		return o, err
	}
	return o, nil
}

func (o *TCPOptions) addrKey(rank int) string {
	return o.Prefix + "/addr/" + strconv.Itoa(rank)
}

// tune sets socket options on a new connection. Only a congestion control
// asked for by name can fail it: the default's is a preference.
func (o *TCPOptions) tune(conn net.Conn) error {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	tc.SetNoDelay(true)
	if o.SocketBuffer > 0 {
		tc.SetReadBuffer(o.SocketBuffer)
		tc.SetWriteBuffer(o.SocketBuffer)
	}
	if o.KeepAlive > 0 {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: o.KeepAlive, Interval: o.KeepAlive, Count: 3})
	}
	switch c := o.Congestion; {
	case congestionNamed(c):
		rc, err := tc.SyscallConn()
		if err == nil {
			err = setCongestion(rc, c)
		}
		if err != nil {
			return fmt.Errorf("comm: transport: TCP congestion control %q: %w", c, err)
		}
	case c != "system" && sameHost(tc):
		// auto: a preference; the kernel's choice stands where it refuses.
		if rc, err := tc.SyscallConn(); err == nil {
			setCongestion(rc, "reno")
		}
	}
	return nil
}

// congestionNamed reports whether the TCPOptions.Congestion c names an
// algorithm for every connection, rather than auto or system.
func congestionNamed(c string) bool { return c != "" && c != "auto" && c != "system" }

// sameHost reports whether conn's two ends are on one host: a loopback
// address, or the same address at both ends.
func sameHost(conn *net.TCPConn) bool {
	l, lok := conn.LocalAddr().(*net.TCPAddr)
	r, rok := conn.RemoteAddr().(*net.TCPAddr)
	return lok && rok && sameHostAddrs(l, r)
}

func sameHostAddrs(local, remote *net.TCPAddr) bool {
	return remote.IP.IsLoopback() || remote.IP.Equal(local.IP)
}

// ConnectTCP joins the world described by opts: it binds a port chosen by
// the kernel, publishes "host:port" in store under Prefix+"/addr/<rank>",
// dials every lower rank, accepts every higher rank, and authenticates
// each connection (see TCPOptions.Secret). Connections that fail the
// handshake (garbage, another job, wrong secret or world size, a rank
// already connected) are closed without disturbing the others. It returns
// when all Size-1 connections are up, or, when ctx ends first, an error
// naming the ranks that never connected. All ranks must call it
// concurrently.
func ConnectTCP(ctx context.Context, store AddrStore, opts TCPOptions) (*TCP, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Size == 1 {
		return newTCP(o.Rank, 1, o.MaxFragment, o.CloseTimeout, nil, nil), nil
	}
	if store == nil {
		return nil, errors.New("comm: transport: ConnectTCP needs a store")
	}
	bind, advertise, err := o.hosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("comm: transport: rank %d: %w", o.Rank, err)
	}
	var lc net.ListenConfig
	if c := o.Congestion; congestionNamed(c) {
		// On the listener, which its connections inherit, so that a
		// name the kernel refuses fails here, before any peer dials.
		lc.Control = func(_, _ string, rc syscall.RawConn) error {
			if err := setCongestion(rc, c); err != nil {
				return fmt.Errorf("TCP congestion control %q: %w", c, err)
			}
			return nil
		}
	}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return nil, fmt.Errorf("comm: transport: rank %d: listen: %w", o.Rank, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	addr := net.JoinHostPort(advertise, strconv.Itoa(port))
	if err := store.Set(ctx, o.addrKey(o.Rank), []byte(addr)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("comm: transport: rank %d: publishing address: %w", o.Rank, err)
	}
	m := &meshBuilder{
		advertised: addr,
		o:          &o,
		store:      store,
		hc: &handshakeConfig{
			rank: o.Rank, size: o.Size, job: jobID(o.Prefix),
			secret: o.Secret, maxFragment: o.MaxFragment,
		},
		allUp:   make(chan struct{}),
		conns:   make([]net.Conn, o.Size),
		frags:   make([]int, o.Size),
		lastErr: make([]error, o.Size),
	}
	if err := m.run(ctx, ln); err != nil {
		return nil, err
	}
	t := newTCP(o.Rank, o.Size, o.MaxFragment, o.CloseTimeout, m.conns, m.frags)
	t.readSpin.Store(int64(o.ReadSpin))
	return t, nil
}

// meshBuilder sets up the connections of one rank.
type meshBuilder struct {
	advertised string // this rank's published address
	o          *TCPOptions
	store      AddrStore
	hc         *handshakeConfig
	allUp      chan struct{} // closed when every connection is up

	mu      sync.Mutex // protects following
	conns   []net.Conn // by peer rank
	frags   []int      // peer's largest fragment
	up      int
	lastErr []error // by peer: why the last attempt failed
	strays  int     // refused incoming connections
	stray   error   // the last refusal
	fatal   error   // a failure that retrying cannot mend; ends run
	onFatal func()  // called once, when fatal is set
}

// refusedGrace is how long a published address may refuse connections
// before the dialer gives up: a rank publishes its address only once it
// listens there, and listens until every peer is connected, so a refusal
// that lasts means a wrong address or a dead rank.
const refusedGrace = 2 * time.Second

// run connects the mesh; on failure it closes every connection made.
func (m *meshBuilder) run(parent context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(parent)
	fatal := make(chan struct{})
	m.onFatal = func() { close(fatal) }
	var wg sync.WaitGroup
	wg.Go(func() { m.acceptLoop(ctx, ln, &wg) })
	for q := range m.o.Rank {
		wg.Go(func() { m.dialLoop(ctx, q) })
	}
	select {
	case <-m.allUp:
	case <-ctx.Done():
	case <-fatal:
	}
	ln.Close()
	cancel()
	wg.Wait()

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.up == m.o.Size-1 {
		return nil
	}
	if m.fatal != nil {
		for _, c := range m.conns {
			if c != nil {
				c.Close()
			}
		}
		return fmt.Errorf("comm: transport: rank %d of %d: %w", m.o.Rank, m.o.Size, m.fatal)
	}
	var missing []string
	var detail strings.Builder
	for q, c := range m.conns {
		if q == m.o.Rank {
			continue
		}
		if c != nil {
			c.Close()
			continue
		}
		missing = append(missing, strconv.Itoa(q))
		if m.lastErr[q] != nil {
			fmt.Fprintf(&detail, "; %v", m.lastErr[q])
		} else if q < m.o.Rank {
			fmt.Fprintf(&detail, "; rank %d never published its address: it did not start, or cannot reach the store", q)
		} else {
			fmt.Fprintf(&detail, "; rank %d never dialed in: it may not reach this rank's address %s (check it from rank %d's host, or set GOCOMM_SOCKET_IFNAME or GOCOMM_SOCKET_HOST on this rank)", q, m.advertised, q)
		}
	}
	if m.strays > 0 {
		fmt.Fprintf(&detail, "; %d incoming connection(s) refused, last: %v", m.strays, m.stray)
	}
	return fmt.Errorf("comm: transport: rank %d of %d: ranks [%s] never connected: %w%s",
		m.o.Rank, m.o.Size, strings.Join(missing, " "), context.Cause(parent), detail.String())
}

func (m *meshBuilder) acceptLoop(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) {
	// Bound concurrent handshakes so a flood of strays cannot pile up.
	sem := make(chan struct{}, 2*m.o.Size+16)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return // listener closed
		}
		select {
		case sem <- struct{}{}:
		default:
			conn.Close()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			m.acceptOne(ctx, conn)
		})
	}
}

// acceptOne handshakes an incoming connection and admits it, or closes it.
func (m *meshBuilder) acceptOne(ctx context.Context, conn net.Conn) {
	if err := m.o.tune(conn); err != nil {
		conn.Close()
		m.strayed(err)
		return
	}
	conn.SetDeadline(time.Now().Add(m.o.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	peer, frag, err := m.hc.acceptHandshake(conn)
	if err == nil {
		err = m.admit(conn, peer, frag, stop)
	}
	if err != nil {
		stop()
		conn.Close()
		m.strayed(err)
		return
	}
	if m.o.hooks != nil && m.o.hooks.accepted != nil {
		m.o.hooks.accepted(peer)
	}
}

// strayed counts an incoming connection refused for err.
func (m *meshBuilder) strayed(err error) {
	m.mu.Lock()
	m.strays++
	m.stray = err
	m.mu.Unlock()
	if m.o.hooks != nil && m.o.hooks.refused != nil {
		m.o.hooks.refused(err)
	}
}

// admit acknowledges an authenticated peer and records its connection,
// unless that rank is already connected.
func (m *meshBuilder) admit(conn net.Conn, peer, frag int, stop func() bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns[peer] != nil {
		return fmt.Errorf("%w: rank %d: %w", ErrHandshake, peer, errDuplicate)
	}
	if !stop() {
		return context.Canceled // connect ended; conn is being closed
	}
	if err := sendAck(conn); err != nil {
		return err
	}
	conn.SetDeadline(time.Time{})
	m.addLocked(peer, conn, frag)
	return nil
}

func (m *meshBuilder) addLocked(peer int, conn net.Conn, frag int) {
	m.conns[peer] = conn
	m.frags[peer] = frag
	m.lastErr[peer] = nil
	m.up++
	if m.up == m.o.Size-1 {
		close(m.allUp)
	}
}

// dialLoop connects to the lower rank q, retrying until it succeeds, ctx
// ends, or the failure is one retrying cannot mend: the wrong process
// answered at q's address, or the address kept refusing connections for
// refusedGrace.
func (m *meshBuilder) dialLoop(ctx context.Context, q int) {
	backoff := 10 * time.Millisecond
	var refusedSince time.Time
	for {
		addr, err := m.dialOnce(ctx, q)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			if addr != "" {
				// The time ran out mid-dial: say where this rank was
				// knocking, which is what the user must check.
				m.mu.Lock()
				m.lastErr[q] = m.dialError(q, addr, errNoAnswer)
				m.mu.Unlock()
			}
			return
		}
		refused := errors.Is(err, syscall.ECONNREFUSED)
		if !refused {
			refusedSince = time.Time{}
		} else if refusedSince.IsZero() {
			refusedSince = time.Now()
		}
		err = m.dialError(q, addr, err)
		if errors.Is(err, errWrongProcess) || (refused && time.Since(refusedSince) >= refusedGrace) {
			m.setFatal(err)
			return
		}
		m.mu.Lock()
		m.lastErr[q] = err
		m.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// errNoAnswer is why a dial still in progress when the connection phase
// ended failed.
var errNoAnswer = errors.New("no answer before the connection phase ended")

// setFatal records the first failure that ends the connection phase.
func (m *meshBuilder) setFatal(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fatal == nil {
		m.fatal = err
		m.onFatal()
	}
}

// dialError says what dialing rank q at its published addr found, and
// what to do about it.
func (m *meshBuilder) dialError(q int, addr string, err error) error {
	if addr == "" {
		return err // no address yet
	}
	var why, fix string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = fmt.Sprintf(" (nothing listens there: rank %d died, or published an address of another host)", q)
	case errors.Is(err, errWrongProcess):
	case errors.Is(err, ErrHandshake):
		// A gocomm rank refused us: secrets or versions differ.
		return fmt.Errorf("cannot connect to rank %d at %s, the address it published: %w", q, addr, err)
	default:
		why = " (no route to it from here, or its host is down or firewalled)"
	}
	if isLoopbackAddr(addr) && !isLoopbackAddr(m.advertised) {
		fix = fmt.Sprintf("; rank %d published a loopback address while this rank published %s: if it runs on another host, set GOCOMM_SOCKET_IFNAME (an interface name or prefix, such as eth0) or GOCOMM_SOCKET_HOST (an address of its host) there", q, m.advertised)
	} else {
		fix = fmt.Sprintf("; if rank %d's host has several networks, choose the one the others reach with GOCOMM_SOCKET_IFNAME or GOCOMM_SOCKET_HOST there", q)
	}
	return fmt.Errorf("cannot connect to rank %d at %s, the address it published: %w%s%s", q, addr, err, why, fix)
}

// dialOnce dials rank q once; it returns the address it dialed ("" when
// q has not published one yet).
func (m *meshBuilder) dialOnce(ctx context.Context, q int) (string, error) {
	key, err := m.store.Get(ctx, m.o.addrKey(q))
	if err != nil {
		return "", fmt.Errorf("reading the address of rank %d: %w", q, err)
	}
	addr := string(key)
	return addr, m.dialAddr(ctx, q, addr)
}

func (m *meshBuilder) dialAddr(ctx context.Context, q int, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if err := m.o.tune(conn); err != nil {
		conn.Close()
		return err
	}
	conn.SetDeadline(time.Now().Add(m.o.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	frag, err := m.hc.dialHandshake(conn, q)
	if err == nil && !stop() {
		err = context.Canceled
	}
	if err != nil {
		conn.Close()
		return err
	}
	conn.SetDeadline(time.Time{})
	m.mu.Lock()
	m.addLocked(q, conn, frag)
	m.mu.Unlock()
	return nil
}
