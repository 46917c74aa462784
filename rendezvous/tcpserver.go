package rendezvous

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// TCPStoreServer hosts a TCP store: the server half of PyTorch's TCPStore,
// run by rank 0 (or by a launcher). It speaks both the torch 1.x and the
// torch 2.x protocol, chosen per connection from its first bytes, so gocomm
// ranks and torch ranks of either generation can share it. See the package
// doc for what is and is not supported.
//
// Each connection is served by its own goroutine (and one that sends the
// STOP_WAITINGs its waits earn); a connection that sends
// something the server cannot serve (an unknown query, a key over
// MaxKeyLen, a value over MaxValueLen, more than MaxKeys keys, a GET of a
// missing key, an ADD to a non-counter) is closed and the others carry on.
//
// With WithSecret, every connection must first pass the authenticated
// handshake (see WithSecret); one that fails it, or does not finish it
// within the auth timeout, is closed and logged, and the job goes on.
// Refused counts the connections closed for either reason.
type TCPStoreServer struct {
	ln   net.Listener
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	secret      []byte       // nil: no authentication
	logger      *slog.Logger // refusals; nil: not logged
	authTimeout time.Duration
	refused     refusalLog

	mu     sync.Mutex // protects following
	t      *table
	conns  map[*serverConn]struct{}
	closed bool
}

// ListenTCPStore starts a TCP store server listening on addr ("host:port";
// port 0 picks a free one, see Addr). Options: WithSecret, WithLogger,
// WithAuthTimeout.
func ListenTCPStore(addr string, opts ...TCPOption) (*TCPStoreServer, error) {
	o := tcpOpts(opts)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &Error{Op: "listen", Store: "tcp " + addr, Err: fmt.Errorf("cannot listen for the store (is another job's master still on this port?): %w", err)}
	}
	s := &TCPStoreServer{
		ln:    ln,
		done:  make(chan struct{}),
		t:     newTable(),
		conns: map[*serverConn]struct{}{},

		secret:      o.secret,
		logger:      o.logger,
		authTimeout: o.authTimeout,
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *TCPStoreServer) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: it stops accepting, closes every connection (so
// every client blocked in a wait gets an error) and returns once every
// goroutine it started has ended. Closing twice is not an error.
func (s *TCPStoreServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *TCPStoreServer) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			// Out of file descriptors and the like: wait and retry.
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		c := newServerConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// serverConn is one client connection.
type serverConn struct {
	srv *TCPStoreServer
	nc  net.Conn
	br  *bufio.Reader

	// waits is the connection's wait state in srv.t, guarded by srv.mu.
	waits *connWaits

	// wmu serialises writes: serve's replies and sendStops' STOP_WAITINGs.
	// Holding it while taking the owed STOP_WAITINGs under srv.mu keeps
	// them in the order torch's single-threaded server would send them.
	wmu sync.Mutex
}

func newServerConn(s *TCPStoreServer, nc net.Conn) *serverConn {
	return &serverConn{srv: s, nc: nc, br: bufio.NewReader(nc), waits: newConnWaits()}
}

func (c *serverConn) serve() {
	defer c.srv.wg.Done()
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c.sendStops(quit)
	}()
	defer func() {
		c.nc.Close()
		close(quit)
		<-stopped
		c.srv.mu.Lock()
		c.srv.t.clearWaits(c.waits)
		delete(c.srv.conns, c)
		c.srv.mu.Unlock()
	}()
	if !c.admit() {
		return
	}
	d, err := detectDialect(c.br)
	if err != nil {
		return
	}
	first := true
	for {
		req, err := readRequest(c.br, d)
		if err != nil {
			c.violation(err)
			return
		}
		if d == dialectV2 && first != (req.op == opValidate) {
			c.violation(fmt.Errorf("%w: %v: VALIDATE must come first and only first", ErrProtocol, req.op))
			return
		}
		first = false
		if err := c.serveRequest(req); err != nil {
			c.violation(err)
			return
		}
	}
}

// violation counts and logs a connection closed for what it sent: an
// unknown query, an oversized length, a request the server cannot serve.
// A hang-up or a network error is no violation.
func (c *serverConn) violation(err error) {
	var reason error
	switch {
	case errors.Is(err, errUnknownQuery), errors.Is(err, ErrTooLarge), errors.Is(err, ErrProtocol):
		reason = err
	case errors.Is(err, errDrop):
		reason = errors.New("a request the server cannot serve (GET of a missing key, ADD to a non-counter, WATCH_KEY or a bad VALIDATE)")
	default:
		return
	}
	c.srv.refused.note(c.srv.logger, c.nc.RemoteAddr(), reason)
}

// serveRequest applies req and writes its answer, preceded by the
// STOP_WAITINGs owed before it was applied.
func (c *serverConn) serveRequest(req request) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out, err := c.handle(req)
	if err != nil || len(out) == 0 {
		return err
	}
	_, err = c.nc.Write(out)
	return err
}

// sendStops writes the STOP_WAITINGs that sets by other connections (or
// this one) come to owe while serve is reading, until quit closes.
func (c *serverConn) sendStops(quit <-chan struct{}) {
	for {
		select {
		case <-c.waits.notify:
		case <-quit:
			return
		}
		c.wmu.Lock()
		c.srv.mu.Lock()
		n := c.waits.takeStops()
		c.srv.mu.Unlock()
		var err error
		if n > 0 {
			_, err = c.nc.Write(make([]byte, n)) // STOP_WAITING is 0
		}
		c.wmu.Unlock()
		if err != nil {
			c.nc.Close() // serve's read fails and ends the connection
			return
		}
	}
}

// errDrop makes serve close the connection.
var errDrop = errors.New("drop connection")

// withTable runs fn on the table under the server's lock and returns its
// answer preceded by the STOP_WAITINGs this connection is owed by then: torch's
// server would have sent those before serving this request.
func (c *serverConn) withTable(fn func(t *table) ([]byte, error)) ([]byte, error) {
	s := c.srv
	s.mu.Lock()
	out, err := fn(s.t)
	n := c.waits.takeStops()
	s.mu.Unlock()
	if n > 0 && err == nil {
		out = append(make([]byte, n, n+len(out)), out...)
	}
	return out, err
}

// handle applies req and returns its answer (nil for the queries that have
// none); errDrop closes the connection.
func (c *serverConn) handle(req request) ([]byte, error) {
	switch req.op {
	case opValidate:
		if req.word != validationMagic {
			return nil, errDrop
		}
		return nil, nil
	case opPing:
		return c.withTable(func(*table) ([]byte, error) {
			return binary.LittleEndian.AppendUint32(nil, req.word), nil
		})
	}
	return c.withTable(func(t *table) ([]byte, error) {
		return c.apply(t, req)
	})
}

// apply is handle's table work, run under the server's lock.
func (c *serverConn) apply(t *table, req request) ([]byte, error) {
	switch req.op {
	case opSet:
		t.set(req.keys[0], req.values[0])
		return nil, nil
	case opAppend:
		t.appendTo(req.keys[0], req.values[0])
		return nil, nil
	case opMultiSet:
		for i, k := range req.keys {
			t.set(k, req.values[i])
		}
		return nil, nil
	case opCompareSet:
		return appendSized(nil, t.compareSet(req.keys[0], req.values[0], req.values[1])), nil
	case opGet, opMultiGet:
		var out []byte
		for _, k := range req.keys {
			v, ok := t.get(k)
			if !ok {
				return nil, errDrop // torch's server fails the same way; clients WAIT first
			}
			out = appendSized(out, v)
		}
		return out, nil
	case opAdd:
		n, err := t.add(req.keys[0], req.delta)
		if err != nil {
			return nil, errDrop
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(n)), nil
	case opCheck:
		if t.check(req.keys) {
			return []byte{checkReady}, nil
		}
		return []byte{checkNotReady}, nil
	case opWait:
		if t.waitConn(c.waits, req.keys) {
			return []byte{waitStop}, nil
		}
		return nil, nil // answered by sendStops once the keys are set
	case opCancelWait:
		t.clearWaits(c.waits)
		return []byte{waitCanceled}, nil
	case opNumKeys:
		return binary.LittleEndian.AppendUint64(nil, uint64(t.numKeys())), nil
	case opDeleteKey:
		var n uint64
		if t.remove(req.keys[0]) {
			n = 1
		}
		return binary.LittleEndian.AppendUint64(nil, n), nil
	default: // opWatchKey: torch 1.x watch callbacks are not supported
		return nil, errDrop
	}
}
