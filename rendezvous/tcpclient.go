package rendezvous

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCPStore is a client of a TCP store server: ours (TCPStoreServer) or
// PyTorch's TCPStore, torch 1.x or 2.x (TorchProtocol says which protocol
// it speaks; see the package doc). Like torch's client it prefixes every
// key with "/" on the wire, so a gocomm rank and a torch rank naming the
// same key meet.
//
// Requests go over one main connection, one at a time and in order, so a
// rank reads its own writes. A Get or Wait whose keys are not there yet
// blocks on a separate wait connection, so other goroutines keep using the
// store meanwhile. When ctx ends a wait, torch 2.x's CANCEL_WAIT withdraws
// it and its connection is kept; in torch 1.x's protocol, and when ctx ends
// any other request, the connection is closed (the server forgets a closed
// connection's wait) and a new one dialed for the next request.
type TCPStore struct {
	addr    string
	dialect dialect
	forced  bool            // GOCOMM_TORCH_STORE (or a test) chose dialect: no probe
	server  *TCPStoreServer // set when this store is the master (NewTCPStore)
	secret  []byte          // WithSecret: authenticate every connection (tcpauth.go)
	done    chan struct{}   // closed by Close

	// mainConn holds the main connection while no request uses it; nil in
	// the channel means it must be dialed again. Receiving is taking the
	// turn; the channel (unlike a mutex) lets a waiting caller give up when
	// its ctx ends.
	mainConn chan *clientConn

	mu     sync.Mutex // protects following
	closed bool
	conns  map[*clientConn]struct{} // every open connection, closed by Close
	idle   []*clientConn            // wait connections free for reuse
}

var _ Store = (*TCPStore)(nil)

// maxIdleWaitConns bounds the wait connections kept open between waits.
const maxIdleWaitConns = 4

// clientConn is one connection to the server.
type clientConn struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte // request encoding scratch
}

// NewTCPStore returns the store of a job whose master is at addr. If isMaster,
// it first starts a TCPStoreServer listening on addr (port 0 picks one; see
// Addr) and Close of the returned store also stops that server. Otherwise it
// dials addr as DialTCPStore does, retrying until ctx is done. The options
// apply to the server and the client (see WithSecret).
func NewTCPStore(ctx context.Context, addr string, isMaster bool, opts ...TCPOption) (*TCPStore, error) {
	if !isMaster {
		return DialTCPStore(ctx, addr, opts...)
	}
	srv, err := ListenTCPStore(addr, opts...)
	if err != nil {
		return nil, err
	}
	st, err := DialTCPStore(ctx, srv.Addr().String(), opts...)
	if err != nil {
		srv.Close()
		return nil, err
	}
	st.server = srv
	return st, nil
}

// DialTCPStore connects to the TCP store server at addr ("host:port"),
// retrying with backoff until one accepts or ctx is done: ranks may start
// before the master does. Give ctx a deadline. The error after ctx is done
// wraps ErrMasterUnreachable and names addr. With WithSecret, every
// connection authenticates first; a failed authentication is not retried
// (the error wraps ErrAuth).
//
// The generation of torch's protocol to speak is GOCOMM_TORCH_STORE's (1 or
// 2; a server that speaks the other is an error wrapping ErrProtocol, not
// retried); unset or "auto", the first connection probes the server, safely
// for both generations, and what it finds is remembered for addr (see the
// package doc). Against torch 2.x's libuv server the probe waits one
// second for its silence.
func DialTCPStore(ctx context.Context, addr string, opts ...TCPOption) (*TCPStore, error) {
	d, err := dialectFromEnv()
	if err != nil {
		return nil, &Error{Op: "dial", Store: "tcp " + addr, Err: err}
	}
	return dialTCPStore(ctx, addr, d, opts...)
}

// dialTCPStore is DialTCPStore speaking the given dialect, or probing for
// it (dialectProbe; see handshake).
func dialTCPStore(ctx context.Context, addr string, d dialect, opts ...TCPOption) (*TCPStore, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, &Error{Op: "dial", Store: "tcp " + addr, Err: fmt.Errorf("the store address must be host:port (MASTER_ADDR:MASTER_PORT): %w", err)}
	}
	s := &TCPStore{
		addr:     addr,
		dialect:  d,
		forced:   d != dialectProbe,
		secret:   tcpOpts(opts).secret,
		done:     make(chan struct{}),
		mainConn: make(chan *clientConn, 1),
		conns:    map[*clientConn]struct{}{},
	}
	backoff := 10 * time.Millisecond
	var lastErr error // the last failure not caused by ctx ending
	for {
		c, err := s.dial(ctx)
		if err == nil {
			s.mainConn <- c
			return s, nil
		}
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrProtocol) {
			return nil, &Error{Op: "dial", Store: "tcp " + addr, Err: err}
		}
		if ctx.Err() != nil {
			if lastErr == nil {
				lastErr = err
			}
			return nil, &Error{Op: "dial", Store: "tcp " + addr, Err: fmt.Errorf(
				"%w: nothing accepted a connection at %s before the context ended; is the master (rank 0) running, and are MASTER_ADDR and MASTER_PORT right? (last attempt: %v): %w",
				ErrMasterUnreachable, addr, lastErr, ctx.Err())}
		}
		lastErr = err
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// Addr returns the address of the server this store talks to ("host:port";
// for a master started on port 0, the port actually chosen).
func (s *TCPStore) Addr() string { return s.addr }

// dial opens and registers one connection.
func (s *TCPStore) dial(ctx context.Context) (*clientConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	c := &clientConn{nc: nc, br: bufio.NewReader(nc)}
	if s.secret != nil {
		if ok, err := s.exchange(ctx, c, func(c *clientConn) error { return clientAuthBounded(c.nc, c.br, s.secret, DefaultAuthTimeout) }); !ok {
			nc.Close()
			if err == nil || ctx.Err() != nil {
				err = cmp.Or(ctx.Err(), err)
			}
			return nil, err
		}
	}
	if c, err = s.handshake(ctx, c); err != nil {
		return nil, err // a mismatch wraps ErrProtocol: not retried
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil, ErrStoreClosed
	}
	s.conns[c] = struct{}{}
	return c, nil
}

// discard closes c for good.
func (s *TCPStore) discard(c *clientConn) {
	c.nc.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// aLongTimeAgo is a deadline in the past: setting it fails pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// exchange runs fn (one request and its reply) on c and makes ctx interrupt
// it. It reports whether c may be used again: not after an error, nor when
// ctx ended as fn completed (the past deadline may be set on c by now).
func (s *TCPStore) exchange(ctx context.Context, c *clientConn, fn func(c *clientConn) error) (reusable bool, err error) {
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	err = fn(c)
	stopped := stop()
	return err == nil && stopped, err
}

// failure turns an I/O error into the error a caller should see.
func (s *TCPStore) failure(ctx context.Context, op string, keys []string, err error) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		err = ErrStoreClosed
	case ctx.Err() != nil:
		err = waitError(ctx, "no answer from the store server")
	case errors.Is(err, ErrProtocol), errors.Is(err, ErrTooLarge), errors.Is(err, ErrStoreClosed):
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		err = fmt.Errorf("%w: the server closed the connection (it exited, or could not serve this request)", ErrConnectionLost)
	default:
		err = fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	return &Error{Op: op, Keys: keys, Store: "tcp " + s.addr, Err: err}
}

// onMain runs fn on the main connection, dialing it again if an earlier
// request broke it.
func (s *TCPStore) onMain(ctx context.Context, op string, keys []string, fn func(c *clientConn) error) error {
	if err := ctx.Err(); err != nil {
		return s.failure(ctx, op, keys, err)
	}
	var c *clientConn
	select {
	case c = <-s.mainConn:
	case <-ctx.Done():
		return s.failure(ctx, op, keys, ctx.Err())
	case <-s.done:
		return s.failure(ctx, op, keys, ErrStoreClosed)
	}
	if err := s.checkOpen(); err != nil {
		s.mainConn <- c
		return s.failure(ctx, op, keys, err)
	}
	if c == nil {
		var err error
		if c, err = s.dial(ctx); err != nil {
			s.mainConn <- nil
			return s.failure(ctx, op, keys, err)
		}
	}
	ok, err := s.exchange(ctx, c, fn)
	if !ok {
		s.discard(c)
		c = nil
	}
	s.mainConn <- c
	if err != nil {
		return s.failure(ctx, op, keys, err)
	}
	return nil
}

func (s *TCPStore) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStoreClosed
	}
	return nil
}

// awaitKeys sends WAIT for keys on a wait connection and blocks for the
// answer.
func (s *TCPStore) awaitKeys(ctx context.Context, op string, keys, wireKeys []string) error {
	if err := ctx.Err(); err != nil {
		return s.failure(ctx, op, keys, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.failure(ctx, op, keys, ErrStoreClosed)
	}
	var c *clientConn
	if n := len(s.idle); n > 0 {
		c, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.mu.Unlock()
	if c == nil {
		var err error
		if c, err = s.dial(ctx); err != nil {
			return s.failure(ctx, op, keys, err)
		}
	}
	ok, err := s.awaitOn(ctx, c, wireKeys)
	s.mu.Lock()
	if ok && !s.closed && len(s.idle) < maxIdleWaitConns {
		s.idle = append(s.idle, c)
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		s.discard(c)
	}
	if err != nil {
		return s.failure(ctx, op, keys, err)
	}
	return nil
}

func (c *clientConn) send(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

func (c *clientConn) request(d dialect, req request) error {
	b, err := appendRequest(c.buf[:0], d, req)
	if err != nil {
		return err
	}
	c.buf = b[:0]
	if cap(c.buf) > 64<<10 {
		c.buf = nil // do not pin a large value's buffer
	}
	return c.send(b)
}

func (c *clientConn) readInt64() (int64, error) {
	u, err := readU64(c.br)
	return int64(u), err
}

func (c *clientConn) readValue() ([]byte, error) {
	return readSized(c.br, MaxValueLen, "value")
}

// wire returns key as stored on the server, checked against MaxKeyLen.
func wireKey(key string) (string, error) {
	k := "/" + key
	return k, checkKey(k)
}

func wireKeys(keys []string) ([]string, error) {
	if len(keys) > MaxKeys {
		return nil, checkKeys(keys)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		var err error
		if out[i], err = wireKey(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *TCPStore) invalid(op string, keys []string, err error) error {
	return &Error{Op: op, Keys: keys, Store: "tcp " + s.addr, Err: err}
}

// Set implements Store. The protocol does not acknowledge SET, so Set
// follows it with a CHECK of no keys, which every server answers at once:
// when Set returns, the server has applied it (every rank can read it) and
// a lost server is an error rather than a silent loss.
func (s *TCPStore) Set(ctx context.Context, key string, value []byte) error {
	k, err := wireKey(key)
	if err == nil {
		err = checkValue(value)
	}
	if err != nil {
		return s.invalid("set", []string{key}, err)
	}
	return s.onMain(ctx, "set", []string{key}, func(c *clientConn) error {
		if err := c.request(s.dialect, request{op: opSet, keys: []string{k}, values: [][]byte{value}}); err != nil {
			return err
		}
		ok, err := s.check(c, nil)
		if err == nil && !ok {
			err = fmt.Errorf("%w: CHECK of no keys answered NOT_READY", ErrProtocol)
		}
		return err
	})
}

// check asks whether all wireKeys exist, on c.
func (s *TCPStore) check(c *clientConn, wireKeys []string) (bool, error) {
	if err := c.request(s.dialect, request{op: opCheck, keys: wireKeys}); err != nil {
		return false, err
	}
	b, err := c.br.ReadByte()
	if err != nil {
		return false, err
	}
	switch b {
	case checkReady:
		return true, nil
	case checkNotReady:
		return false, nil
	}
	return false, fmt.Errorf("%w: CHECK answered with %d", ErrProtocol, b)
}

// Get implements Store.
func (s *TCPStore) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := wireKey(key)
	if err != nil {
		return nil, s.invalid("get", []string{key}, err)
	}
	keys, wk := []string{key}, []string{k}
	for {
		var value []byte
		var found bool
		err := s.onMain(ctx, "get", keys, func(c *clientConn) error {
			var err error
			if found, err = s.check(c, wk); err != nil || !found {
				return err
			}
			if err := c.request(s.dialect, request{op: opGet, keys: wk}); err != nil {
				return err
			}
			value, err = c.readValue()
			return err
		})
		if err != nil {
			return nil, err
		}
		if found {
			return value, nil
		}
		if err := s.awaitKeys(ctx, "get", keys, wk); err != nil {
			return nil, err
		}
	}
}

// Wait implements Store.
func (s *TCPStore) Wait(ctx context.Context, keys ...string) error {
	wk, err := wireKeys(keys)
	if err != nil {
		return s.invalid("wait", keys, err)
	}
	for {
		ok, err := s.checkWire(ctx, "wait", keys, wk)
		if err != nil || ok {
			return err
		}
		if err := s.awaitKeys(ctx, "wait", keys, wk); err != nil {
			return err
		}
	}
}

func (s *TCPStore) checkWire(ctx context.Context, op string, keys, wk []string) (bool, error) {
	var ok bool
	err := s.onMain(ctx, op, keys, func(c *clientConn) error {
		var err error
		ok, err = s.check(c, wk)
		return err
	})
	return ok, err
}

// Check implements Store.
func (s *TCPStore) Check(ctx context.Context, keys ...string) (bool, error) {
	wk, err := wireKeys(keys)
	if err != nil {
		return false, s.invalid("check", keys, err)
	}
	return s.checkWire(ctx, "check", keys, wk)
}

// Add implements Store.
func (s *TCPStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	k, err := wireKey(key)
	if err != nil {
		return 0, s.invalid("add", []string{key}, err)
	}
	var n int64
	err = s.onMain(ctx, "add", []string{key}, func(c *clientConn) error {
		if err := c.request(s.dialect, request{op: opAdd, keys: []string{k}, delta: delta}); err != nil {
			return err
		}
		var err error
		n, err = c.readInt64()
		return err
	})
	if errors.Is(err, ErrConnectionLost) {
		err = fmt.Errorf("%w (a server drops the connection when the key's value is not a decimal int64 counter)", err)
	}
	return n, err
}

// CompareAndSet implements Store.
func (s *TCPStore) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	k, err := wireKey(key)
	if err == nil {
		err = errors.Join(checkValue(expected), checkValue(desired))
	}
	if err != nil {
		return nil, s.invalid("compare-and-set", []string{key}, err)
	}
	var v []byte
	err = s.onMain(ctx, "compare-and-set", []string{key}, func(c *clientConn) error {
		if err := c.request(s.dialect, request{op: opCompareSet, keys: []string{k}, values: [][]byte{expected, desired}}); err != nil {
			return err
		}
		var err error
		v, err = c.readValue()
		return err
	})
	return v, err
}

// Delete implements Store.
func (s *TCPStore) Delete(ctx context.Context, key string) (bool, error) {
	k, err := wireKey(key)
	if err != nil {
		return false, s.invalid("delete", []string{key}, err)
	}
	var n int64
	err = s.onMain(ctx, "delete", []string{key}, func(c *clientConn) error {
		if err := c.request(s.dialect, request{op: opDeleteKey, keys: []string{k}}); err != nil {
			return err
		}
		var err error
		n, err = c.readInt64()
		return err
	})
	return n == 1, err
}

// NumKeys implements Store. It counts every key on the server, including
// keys torch itself keeps there (such as "init/").
func (s *TCPStore) NumKeys(ctx context.Context) (int64, error) {
	var n int64
	err := s.onMain(ctx, "num-keys", nil, func(c *clientConn) error {
		if err := c.request(s.dialect, request{op: opNumKeys}); err != nil {
			return err
		}
		var err error
		n, err = c.readInt64()
		return err
	})
	return n, err
}

// Close closes every connection, failing pending calls with ErrStoreClosed,
// and stops the server if this store started it (NewTCPStore with
// isMaster).
func (s *TCPStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	conns := s.conns
	s.conns = map[*clientConn]struct{}{}
	s.idle = nil
	s.mu.Unlock()
	for c := range conns {
		c.nc.Close()
	}
	if s.server != nil {
		return s.server.Close()
	}
	return nil
}
