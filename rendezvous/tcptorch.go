package rendezvous

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// This file chooses the generation of PyTorch's TCPStore protocol a TCPStore
// client speaks (the package doc, "Torch 1.x and 2.x"), opens connections
// in it, and holds what only torch 2.x has: MULTI_GET, MULTI_SET and
// CANCEL_WAIT.

// envTorchStore forces the generation (env.EnvTorchStore).
const envTorchStore = "GOCOMM_TORCH_STORE"

// dialectProbe marks a TCPStore whose generation is not known yet: its
// first connection probes the server (handshake).
const dialectProbe dialect = 0xff

// Handshake bounds. Variables, not constants, only so that their values
// read well in messages; nothing changes them.
var (
	// probeSilence is how long a probe waits for the answer of a torch 1.x
	// server before taking silence for torch 2.x's libuv server, which
	// leaves a connection that does not open with VALIDATE unanswered
	// (TCPStoreLibUvBackend.cpp, UvClient::processBuf) where the classic
	// server closes it (TCPStoreBackend.cpp, query).
	probeSilence = time.Second
	// handshakeTimeout bounds every other step of a handshake: a 2.x
	// PING, a forced 1.x CHECK, a second patient probe.
	handshakeTimeout = 10 * time.Second
	// cancelTimeout bounds the CANCEL_WAIT exchange that follows a wait
	// whose ctx ended (2.x): past it the connection is dropped instead.
	cancelTimeout = 5 * time.Second
)

// storeProtocol is what is known of the server at one address.
type storeProtocol struct {
	d dialect
	// noPing: a torch 2.x server older than PING (its classic server
	// drops a connection that sends one), so a new connection confirms
	// VALIDATE with a CHECK of no keys instead.
	noPing bool
}

// knownProtocols remembers, per server address ("host:port" as dialed),
// the storeProtocol a probe found or a forced generation confirmed, so
// that later connections and later stores of this process skip the probe.
var knownProtocols sync.Map

func knownProtocol(addr string) (storeProtocol, bool) {
	p, ok := knownProtocols.Load(addr)
	if !ok {
		return storeProtocol{}, false
	}
	return p.(storeProtocol), true
}

// dialectFromEnv is the generation GOCOMM_TORCH_STORE asks for:
// dialectProbe when it is unset, empty or "auto".
func dialectFromEnv() (dialect, error) {
	return parseTorchStore(os.Getenv(envTorchStore))
}

// parseTorchStore reads a value of GOCOMM_TORCH_STORE.
func parseTorchStore(v string) (dialect, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "auto":
		return dialectProbe, nil
	case "1":
		return dialectV1, nil
	case "2":
		return dialectV2, nil
	}
	return 0, fmt.Errorf("%s=%q: want 1 (a store hosted by torch 1.x, or a 2.x from before the VALIDATE handshake such as 2.0), 2 (a torch 2.x with the VALIDATE handshake) or auto (probe the server; the default)", envTorchStore, v)
}

// TorchProtocol returns the generation of PyTorch's TCPStore protocol this
// client speaks: 1 (torch 1.x, no handshake) or 2 (torch 2.x with the
// VALIDATE handshake). DialTCPStore chose it (see the package doc); it does
// not change afterwards. Safe for concurrent use.
func (s *TCPStore) TorchProtocol() int {
	if s.dialect == dialectV2 {
		return 2
	}
	return 1
}

// probeResult is how a server met a handshake's request.
type probeResult uint8

const (
	probeAnswered probeResult = iota // the answer expected
	probeDropped                     // the connection closed or reset
	probeSilent                      // nothing within the bound
)

func (r probeResult) String() string {
	switch r {
	case probeAnswered:
		return "answered"
	case probeDropped:
		return "closed the connection"
	}
	return "did not answer"
}

// handshake makes c, a new connection of s (authenticated if s has a
// secret), ready for requests in s's generation, choosing that generation
// first if s has none yet (only the first connection of a store, before
// any other goroutine sees it, finds dialectProbe). It may replace c: a
// probe the server refused leaves its connection unusable. On error every
// connection it opened is closed.
func (s *TCPStore) handshake(ctx context.Context, c *clientConn) (*clientConn, error) {
	want := s.dialect
	known, isKnown := knownProtocol(s.addr)
	if s.secret != nil {
		isKnown = false // what a secret opens is no guide for other clients
	}
	if want == dialectProbe {
		switch {
		case isKnown:
			want = known.d
		case s.secret != nil:
			want = dialectV2 // it authenticated: a gocomm server, which speaks both
		}
	}
	var err error
	switch want {
	case dialectV1:
		if !isKnown || known.d != dialectV1 {
			c, err = s.confirmV1(ctx, c)
		}
	case dialectV2:
		noPing := isKnown && known.d == dialectV2 && known.noPing
		c, err = s.openV2(ctx, c, noPing, s.forced)
		if errors.Is(err, errStaleProtocol) && s.dialect == dialectProbe {
			// What the address spoke before, it does not now: a new
			// store probes it afresh.
			if c, err = s.rawDial(ctx); err == nil {
				c, want, err = s.probe(ctx, c)
			}
		}
	default:
		c, want, err = s.probe(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	if s.dialect == dialectProbe {
		s.dialect = want
	}
	return c, nil
}

// probe finds the generation of the server: first a request every torch
// 1.x server answers at once (CHECK of no keys), which torch 2.x refuses
// (closing the connection, or in silence); then, refused, VALIDATE and
// PING on a new connection.
func (s *TCPStore) probe(ctx context.Context, c *clientConn) (*clientConn, dialect, error) {
	r1, err := s.askV1(ctx, c, probeSilence)
	if err != nil {
		c.nc.Close()
		return nil, 0, err
	}
	if r1 == probeAnswered {
		s.remember(storeProtocol{d: dialectV1})
		return c, dialectV1, nil
	}
	c.nc.Close()
	c2, r2, err := s.tryV2(ctx, false)
	if err != nil || r2 == probeAnswered {
		return c2, dialectV2, err
	}
	switch {
	case r1 == probeDropped && r2 == probeDropped:
		// A torch 2.x classic server older than PING drops it as an
		// unknown query. (A torch 1.x server never drops a CHECK of no
		// keys, so VALIDATE cannot reach one here.)
		c3, r3, err := s.tryV2(ctx, true)
		if err != nil || r3 == probeAnswered {
			return c3, dialectV2, err
		}
	case r1 == probeSilent && r2 == probeDropped:
		// Silence, then a PING refused: a torch 1.x server too slow for
		// probeSilence, which drops the PING (tryV2 says why)? Ask it
		// again, patiently.
		c3, err := s.rawDial(ctx)
		if err != nil {
			return nil, 0, err
		}
		r3, err := s.askV1(ctx, c3, handshakeTimeout)
		if err == nil && r3 == probeAnswered {
			s.remember(storeProtocol{d: dialectV1})
			return c3, dialectV1, nil
		}
		c3.nc.Close()
		if err != nil {
			return nil, 0, err
		}
	}
	return nil, 0, fmt.Errorf("%w: the server at %s speaks neither generation of torch's TCPStore protocol: it %v after a torch 1.x CHECK (within %v) and %v after torch 2.x's VALIDATE and PING (within %v); is it a TCPStore server (a gocomm server with GOCOMM_SECRET set closes the connections of clients without the secret)? If you know which torch hosts it, set %s=1 (torch 1.x, or a 2.x without the VALIDATE handshake) or 2 (a 2.x with it)",
		ErrProtocol, s.addr, r1, probeSilence, r2, handshakeTimeout, envTorchStore)
}

// tryV2 opens a new connection and sends VALIDATE and PING (or, noPing,
// a 2.x CHECK of no keys) on it, returning it when answered.
func (s *TCPStore) tryV2(ctx context.Context, noPing bool) (*clientConn, probeResult, error) {
	c, err := s.rawDial(ctx)
	if err != nil {
		return nil, 0, err
	}
	r, err := s.askV2(ctx, c, noPing)
	if err != nil || r != probeAnswered {
		c.nc.Close()
		return nil, r, err
	}
	s.remember(storeProtocol{d: dialectV2, noPing: noPing})
	return c, r, nil
}

// confirmV1 checks, on c, that the server answers torch 1.x (forced by
// GOCOMM_TORCH_STORE=1 or by the caller) before any real request goes out,
// so that a torch 2.x server is reported as such instead of as a lost
// connection or a hang.
func (s *TCPStore) confirmV1(ctx context.Context, c *clientConn) (*clientConn, error) {
	r, err := s.askV1(ctx, c, handshakeTimeout)
	switch {
	case err != nil || r == probeAnswered:
	case s.forced:
		err = fmt.Errorf("%w: %s=1 forces torch 1.x's protocol, but the server at %s %v after a torch 1.x CHECK (within %v), as a torch 2.x server does (it wants the VALIDATE handshake): set %s=2, or unset it to probe",
			ErrProtocol, envTorchStore, s.addr, r, handshakeTimeout, envTorchStore)
	default:
		err = fmt.Errorf("%w: the server at %s spoke torch 1.x's protocol before but %v after a torch 1.x CHECK now (within %v): was it replaced by another?",
			ErrProtocol, s.addr, r, handshakeTimeout)
	}
	if err != nil {
		c.nc.Close()
		return nil, err
	}
	s.remember(storeProtocol{d: dialectV1})
	return c, nil
}

// openV2 opens c in torch 2.x: VALIDATE, then PING (unless noPing). When
// forced (GOCOMM_TORCH_STORE=2) and the server closes the connection at
// PING, the server may be a 2.x one older than PING or a 1.x one: the
// probe tells them apart (never sending the PING-less opening to a 1.x
// server, which would read its bytes as a SET of a 22 GB key and wait for
// it, stuck) before the mismatch is reported.
func (s *TCPStore) openV2(ctx context.Context, c *clientConn, noPing, forced bool) (*clientConn, error) {
	r, err := s.askV2(ctx, c, noPing)
	if err == nil && r == probeAnswered {
		s.remember(storeProtocol{d: dialectV2, noPing: noPing})
		return c, nil
	}
	c.nc.Close()
	if err != nil {
		return nil, err
	}
	knownProtocols.Delete(s.addr) // whatever answered before is not what answers now
	if !forced {
		return nil, fmt.Errorf("%w: the server at %s spoke torch 2.x's protocol before but %v after VALIDATE and PING now (within %v): was it replaced by another?",
			errStaleProtocol, s.addr, r, handshakeTimeout)
	}
	found := "as a torch 1.x server does"
	if !noPing && r == probeDropped {
		c2, err := s.rawDial(ctx)
		if err != nil {
			return nil, err
		}
		c3, d, err := s.probe(ctx, c2)
		switch {
		case err != nil:
			return nil, err
		case d == dialectV2:
			return c3, nil
		}
		c3.nc.Close()
		found = "and it answers torch 1.x's CHECK: it is a torch 1.x server"
	}
	return nil, fmt.Errorf("%w: %s=2 forces torch 2.x's protocol, but the server at %s %v after VALIDATE and PING (within %v), %s: set %s=1, or unset it to probe",
		ErrProtocol, envTorchStore, s.addr, r, handshakeTimeout, found, envTorchStore)
}

// errStaleProtocol: a server no longer speaks what knownProtocols says.
var errStaleProtocol = fmt.Errorf("%w: the store server changed protocol", ErrProtocol)

// remember records what the server at s.addr speaks, unless s
// authenticates: a server with a secret refuses other clients whatever
// they speak.
func (s *TCPStore) remember(p storeProtocol) {
	if s.secret == nil {
		knownProtocols.Store(s.addr, p)
	}
}

// rawDial opens a connection without authentication (probes run only
// against servers without a secret: a server that authenticates is ours).
func (s *TCPStore) rawDial(ctx context.Context) (*clientConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	return &clientConn{nc: nc, br: bufio.NewReader(nc)}, nil
}

// The probe requests. A torch 1.x server answers the 1.x CHECK of no keys
// with READY. Torch 2.x's classic server closes a connection whose first
// byte is not VALIDATE; its libuv server (the default since 2.4) leaves it
// unanswered. CHECK's code (4) is not VALIDATE (0) in 2.x, so the probe
// never reads as a 2.x request that does something.
var probeV1 = mustEncode(dialectV1, request{op: opCheck})

// pingNonce is the PING nonce: any value would do for a 2.x server, which
// echoes it; this one also makes the VALIDATE+PING bytes fail fast on a
// torch 1.x server, which reads them as a SET whose uint64 key length is
// bytes 1-8: 0xCE 0xF7 0x85 0x3C (the magic), 0x0D (PING) and the nonce's
// first three bytes. Byte 2 of the nonce is that length's top byte: 0xFF
// makes the length over 2^63, which torch 1.x's recvString cannot even try
// to allocate (and ours refuses as over MaxKeyLen).
var pingNonce = uint32(os.Getpid())&0xff00ffff | 0x00ff0000

var (
	validateV2  = mustEncode(dialectV2, request{op: opValidate, word: validationMagic})
	pingV2      = mustEncode(dialectV2, request{op: opPing, word: pingNonce})
	checkNoneV2 = mustEncode(dialectV2, request{op: opCheck})
)

func mustEncode(d dialect, req request) []byte {
	b, err := appendRequest(nil, d, req)
	if err != nil {
		panic(err) // a fixed request of the dialect: cannot happen
	}
	return b
}

// askV1 sends the 1.x probe on c and waits up to wait for READY.
func (s *TCPStore) askV1(ctx context.Context, c *clientConn, wait time.Duration) (probeResult, error) {
	var reply [1]byte
	r, err := s.ask(ctx, c, wait, probeV1, reply[:])
	if err == nil && r == probeAnswered && reply[0] != checkReady {
		err = fmt.Errorf("%w: the server at %s answered torch 1.x's CHECK of no keys with %#x, not READY: is it a TCPStore server?", ErrProtocol, s.addr, reply[0])
	}
	return r, err
}

// askV2 sends VALIDATE and PING (noPing: a 2.x CHECK of no keys) on c and
// waits up to handshakeTimeout for the echoed nonce (READY).
func (s *TCPStore) askV2(ctx context.Context, c *clientConn, noPing bool) (probeResult, error) {
	if noPing {
		var reply [1]byte
		r, err := s.ask(ctx, c, handshakeTimeout, append(validateV2[:len(validateV2):len(validateV2)], checkNoneV2...), reply[:])
		if err == nil && r == probeAnswered && reply[0] != checkReady {
			err = fmt.Errorf("%w: the server at %s answered torch 2.x's CHECK of no keys with %#x, not READY", ErrProtocol, s.addr, reply[0])
		}
		return r, err
	}
	var reply [4]byte
	r, err := s.ask(ctx, c, handshakeTimeout, append(validateV2[:len(validateV2):len(validateV2)], pingV2...), reply[:])
	if got := binary.LittleEndian.Uint32(reply[:]); err == nil && r == probeAnswered && got != pingNonce {
		err = fmt.Errorf("%w: the server at %s answered torch 2.x's PING %#x with %#x, not the nonce", ErrProtocol, s.addr, pingNonce, got)
	}
	return r, err
}

// ask writes req on c and reads len(reply) bytes, within wait and ctx. A
// connection closed or reset is probeDropped and no answer within wait
// probeSilent, with a nil error; ctx ending is an error. c's deadline is
// cleared when answered.
func (s *TCPStore) ask(ctx context.Context, c *clientConn, wait time.Duration, req, reply []byte) (probeResult, error) {
	c.nc.SetDeadline(time.Now().Add(wait))
	ok, err := s.exchange(ctx, c, func(c *clientConn) error {
		if err := c.send(req); err != nil {
			return err
		}
		_, err := io.ReadFull(c.br, reply)
		return err
	})
	switch {
	case ok:
		c.nc.SetDeadline(time.Time{})
		return probeAnswered, nil
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case timedOut(err):
		return probeSilent, nil
	case dropped(err):
		return probeDropped, nil
	}
	return 0, err
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dropped reports whether err is the peer closing or resetting the
// connection.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// awaitOn sends WAIT for wireKeys on the wait connection c and blocks for
// STOP_WAITING or ctx. It reports whether c may serve another wait: after
// an answer, and on torch 2.x also after ctx ended, once CANCEL_WAIT has
// withdrawn the wait (torch 1.x has no CANCEL_WAIT: the connection is
// dropped, and servers forget a closed connection's wait).
func (s *TCPStore) awaitOn(ctx context.Context, c *clientConn, wireKeys []string) (reusable bool, err error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.nc.SetDeadline(aLongTimeAgo)
		close(fired)
	})
	sent := false
	err = func() error {
		if err := c.request(s.dialect, request{op: opWait, keys: wireKeys}); err != nil {
			return err
		}
		sent = true
		b, err := c.br.ReadByte()
		if err != nil {
			return err
		}
		if b != waitStop {
			return fmt.Errorf("%w: WAIT answered with %d, not STOP_WAITING", ErrProtocol, b)
		}
		return nil
	}()
	if stop() {
		return err == nil, err
	}
	<-fired // the deadline is in the past
	if err == nil {
		c.nc.SetDeadline(time.Time{}) // answered as ctx ended
		return true, nil
	}
	if s.dialect != dialectV2 || !sent || !timedOut(err) {
		return false, err
	}
	return s.cancelWait(c), err
}

// cancelWait withdraws the wait pending on c (2.x): CANCEL_WAIT, answered
// WAIT_CANCELED, after a STOP_WAITING if the wait ended as it was
// cancelled (TCPStore.cpp, doWait). It reports whether c is clean again.
func (s *TCPStore) cancelWait(c *clientConn) bool {
	c.nc.SetDeadline(time.Now().Add(cancelTimeout))
	if err := c.request(dialectV2, request{op: opCancelWait}); err != nil {
		return false
	}
	b, err := c.br.ReadByte()
	if err == nil && b == waitStop {
		b, err = c.br.ReadByte()
	}
	if err != nil || b != waitCanceled {
		return false
	}
	c.nc.SetDeadline(time.Time{})
	return true
}

// MultiGet returns the values of keys, in order, blocking until every one
// of them is set or ctx is done: torch's multi_get. Against torch 2.x it is
// a CHECK of all the keys and one MULTI_GET; against torch 1.x, which has
// no MULTI_GET, a GET per key on the same connection. The values belong to
// the caller. Safe for concurrent use.
func (s *TCPStore) MultiGet(ctx context.Context, keys ...string) ([][]byte, error) {
	wk, err := wireKeys(keys)
	if err != nil {
		return nil, s.invalid("multi-get", keys, err)
	}
	for {
		var values [][]byte
		var found bool
		err := s.onMain(ctx, "multi-get", keys, func(c *clientConn) error {
			var err error
			if found, err = s.check(c, wk); err != nil || !found {
				return err
			}
			values, err = s.getAll(c, wk)
			return err
		})
		if err != nil {
			return nil, err
		}
		if found {
			return values, nil
		}
		if err := s.awaitKeys(ctx, "multi-get", keys, wk); err != nil {
			return nil, err
		}
	}
}

// getAll reads the values of wireKeys, which exist, on c.
func (s *TCPStore) getAll(c *clientConn, wireKeys []string) ([][]byte, error) {
	values := make([][]byte, len(wireKeys))
	if s.dialect == dialectV2 {
		if err := c.request(s.dialect, request{op: opMultiGet, keys: wireKeys}); err != nil {
			return nil, err
		}
		for i := range values {
			var err error
			if values[i], err = c.readValue(); err != nil {
				return nil, err
			}
		}
		return values, nil
	}
	for i, k := range wireKeys {
		if err := c.request(s.dialect, request{op: opGet, keys: []string{k}}); err != nil {
			return nil, err
		}
		var err error
		if values[i], err = c.readValue(); err != nil {
			return nil, err
		}
	}
	return values, nil
}

// MultiSet sets keys[i] to values[i] for every i, in order, and wakes the
// callers waiting for them: torch's multi_set. Against torch 2.x it is one
// MULTI_SET; against torch 1.x a SET per key. Like Set, it returns once the
// server has applied them all. keys and values must have the same length;
// values are not retained. Safe for concurrent use.
func (s *TCPStore) MultiSet(ctx context.Context, keys []string, values [][]byte) error {
	if len(keys) != len(values) {
		return s.invalid("multi-set", keys, fmt.Errorf("%d keys but %d values: pass one value per key", len(keys), len(values)))
	}
	wk, err := wireKeys(keys)
	for _, v := range values {
		if err == nil {
			err = checkValue(v)
		}
	}
	if err != nil {
		return s.invalid("multi-set", keys, err)
	}
	return s.onMain(ctx, "multi-set", keys, func(c *clientConn) error {
		if s.dialect == dialectV2 {
			if err := c.request(s.dialect, request{op: opMultiSet, keys: wk, values: values}); err != nil {
				return err
			}
		} else {
			for i, k := range wk {
				if err := c.request(s.dialect, request{op: opSet, keys: []string{k}, values: [][]byte{values[i]}}); err != nil {
					return err
				}
			}
		}
		ok, err := s.check(c, nil)
		if err == nil && !ok {
			err = fmt.Errorf("%w: CHECK of no keys answered NOT_READY", ErrProtocol)
		}
		return err
	})
}
