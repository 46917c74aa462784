package rendezvous

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Store authentication. With a secret, a TCP store client opens every
// connection with a challenge-response before its first query:
//
//	client -> server: "GCSA" version(1) client nonce(32)
//	server -> client: status(1) 'A', server nonce(32),
//	                  HMAC-SHA256(secret, "gocomm/v1 store server" | cnonce | snonce)
//	client -> server: HMAC-SHA256(secret, "gocomm/v1 store client" | cnonce | snonce)
//	server -> client: ack(1) 0x01
//
// then the TCPStore protocol as usual. Both nonces are fresh, so a recorded
// exchange cannot be replayed, and the labels stop one side's proof from
// serving as the other's; the client checks the server's proof too, so a
// stranger listening on the master's port learns nothing of the job. "G"
// (0x47) is no query of either torch dialect, so a server tells an opener
// from a torch request by its first byte. A server without a secret answers
// an opener with status 'N' and closes, so that the client can say rank 0
// runs without GOCOMM_SECRET. A server with a secret closes (and logs) a
// connection that does not open so, or does not finish within its auth
// timeout: torch clients cannot authenticate, so a job where torch ranks
// share the store must run it without a secret (see WithSecret).
const (
	authMagic       = "GCSA"
	authVersion     = 1
	authNonceSize   = 32
	authOpenerSize  = len(authMagic) + 1 + authNonceSize
	authMACSize     = sha256.Size
	authStatusAuth  = 'A'
	authStatusNone  = 'N'
	authAckOK       = 0x01
	authServerLabel = "gocomm/v1 store server"
	authClientLabel = "gocomm/v1 store client"
	// DefaultAuthTimeout bounds a connection's authentication on a server
	// with a secret (WithAuthTimeout changes it).
	DefaultAuthTimeout = 10 * time.Second
)

// ErrAuth is wrapped by the errors of a failed store authentication, on
// either side: the secrets differ, one side has none, or the peer is not a
// gocomm store.
var ErrAuth = errors.New("comm: store authentication failed")

// TCPOption configures ListenTCPStore, DialTCPStore and NewTCPStore.
type TCPOption func(*tcpOptions)

type tcpOptions struct {
	secret      []byte
	logger      *slog.Logger
	loggerSet   bool
	authTimeout time.Duration
}

func tcpOpts(opts []TCPOption) tcpOptions {
	o := tcpOptions{authTimeout: DefaultAuthTimeout}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if !o.loggerSet {
		o.logger = slog.Default()
	}
	return o
}

// WithSecret makes a server require, and a client perform, the
// authenticated handshake with secret (GOCOMM_SECRET) on every connection.
// An empty or nil secret means none: no handshake. The option keeps its
// own copy of secret. Every gocomm rank of the job must pass the same
// secret; a torch rank cannot authenticate, so do not pass a secret when
// torch ranks share the store (comm.Init: GOCOMM_STORE_AUTH=0), nor to a
// client of a store torch hosts (torchrun's agent store).
func WithSecret(secret []byte) TCPOption {
	s := bytes.Clone(secret)
	if len(s) == 0 {
		s = nil
	}
	return func(o *tcpOptions) { o.secret = s }
}

// WithLogger sets where a server logs the connections it refuses (at Warn
// level, at most about one line a second after the first few); nil turns
// the logging off. The default is slog.Default(). Clients ignore it.
func WithLogger(l *slog.Logger) TCPOption {
	return func(o *tcpOptions) { o.logger, o.loggerSet = l, true }
}

// WithAuthTimeout bounds how long a server with a secret waits for a new
// connection to authenticate (default DefaultAuthTimeout; d <= 0 keeps the
// default). A connection that is slower is closed and logged.
func WithAuthTimeout(d time.Duration) TCPOption {
	return func(o *tcpOptions) {
		if d > 0 {
			o.authTimeout = d
		}
	}
}

func authMAC(secret []byte, label string, cnonce, snonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(cnonce)
	m.Write(snonce)
	return m.Sum(nil)
}

// isAuthOpener reports whether the connection read through r starts with
// the authentication opener's magic; it only peeks.
func isAuthOpener(r *bufio.Reader) (bool, error) {
	b, err := r.Peek(1)
	if err != nil || b[0] != authMagic[0] {
		return false, err
	}
	b, err = r.Peek(len(authMagic))
	if err != nil {
		return false, err
	}
	return string(b) == authMagic, nil
}

// serverAuth runs the server's side of the handshake on a connection
// whose first bytes were read through r; the caller sets the deadline.
// With a nil secret it answers 'N' and fails.
func serverAuth(r *bufio.Reader, w io.Writer, secret []byte) error {
	opener := make([]byte, authOpenerSize)
	if _, err := io.ReadFull(r, opener); err != nil {
		return fmt.Errorf("%w: reading the opener: %v", ErrAuth, err)
	}
	if string(opener[:len(authMagic)]) != authMagic || opener[len(authMagic)] != authVersion {
		return fmt.Errorf("%w: opener %q is not gocomm store authentication v%d", ErrAuth, opener[:len(authMagic)+1], authVersion)
	}
	if secret == nil {
		w.Write([]byte{authStatusNone})
		return fmt.Errorf("%w: the client wants to authenticate but this server has no secret (GOCOMM_SECRET differs between the ranks)", ErrAuth)
	}
	cnonce := opener[len(authMagic)+1:]
	snonce := make([]byte, authNonceSize)
	if _, err := rand.Read(snonce); err != nil {
		return err
	}
	out := append([]byte{authStatusAuth}, snonce...)
	out = append(out, authMAC(secret, authServerLabel, cnonce, snonce)...)
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("%w: %v", ErrAuth, err)
	}
	mac := make([]byte, authMACSize)
	if _, err := io.ReadFull(r, mac); err != nil {
		return fmt.Errorf("%w: the client hung up before proving itself (secrets differ?): %v", ErrAuth, err)
	}
	if !hmac.Equal(mac, authMAC(secret, authClientLabel, cnonce, snonce)) {
		return fmt.Errorf("%w: wrong proof: the client's secret differs", ErrAuth)
	}
	_, err := w.Write([]byte{authAckOK})
	return err
}

// clientAuth runs the client's side of the handshake on a fresh
// connection (writes to w, reads through r); the caller bounds it.
func clientAuth(r io.Reader, w io.Writer, secret []byte) error {
	opener := make([]byte, 0, authOpenerSize)
	opener = append(opener, authMagic...)
	opener = append(opener, authVersion)
	cnonce := make([]byte, authNonceSize)
	if _, err := rand.Read(cnonce); err != nil {
		return err
	}
	opener = append(opener, cnonce...)
	if _, err := w.Write(opener); err != nil {
		return err
	}
	var status [1]byte
	if _, err := io.ReadFull(r, status[:]); err != nil {
		return fmt.Errorf("%w: the server closed the connection instead of answering the handshake: it is not a gocomm store with GOCOMM_SECRET set (a torch-hosted store cannot authenticate: run without a secret for it, GOCOMM_STORE_AUTH=0): %w", ErrAuth, err)
	}
	switch status[0] {
	case authStatusNone:
		return fmt.Errorf("%w: the store server has no secret: set the same GOCOMM_SECRET on rank 0 (or the launcher hosting the store)", ErrAuth)
	case authStatusAuth:
	default:
		return fmt.Errorf("%w: the server answered %#x: it is not a gocomm store", ErrAuth, status[0])
	}
	in := make([]byte, authNonceSize+authMACSize)
	if _, err := io.ReadFull(r, in); err != nil {
		return fmt.Errorf("%w: reading the server's proof: %w", ErrAuth, err)
	}
	snonce := in[:authNonceSize]
	if !hmac.Equal(in[authNonceSize:], authMAC(secret, authServerLabel, cnonce, snonce)) {
		return fmt.Errorf("%w: the store server's proof is wrong: its secret differs from this rank's GOCOMM_SECRET", ErrAuth)
	}
	if _, err := w.Write(authMAC(secret, authClientLabel, cnonce, snonce)); err != nil {
		return err
	}
	if _, err := io.ReadFull(r, status[:]); err != nil || status[0] != authAckOK {
		return fmt.Errorf("%w: the server refused this rank's proof: secrets differ (ack %#x, %v)", ErrAuth, status[0], err)
	}
	return nil
}

// clientAuthBounded is clientAuth on nc (read through r) within d
// (DefaultAuthTimeout when dialing): a server that neither answers nor hangs up (torch
// 2.x's libuv server ignores what it cannot parse) is reported as such
// rather than waited for until the caller's ctx ends.
func clientAuthBounded(nc net.Conn, r io.Reader, secret []byte, d time.Duration) error {
	nc.SetDeadline(time.Now().Add(d))
	defer nc.SetDeadline(time.Time{})
	err := clientAuth(r, nc, secret)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: the store server did not answer the handshake within %v: it is not a gocomm store with GOCOMM_SECRET set (a torch-hosted store cannot authenticate: GOCOMM_STORE_AUTH=0): %v", ErrAuth, d, err)
	}
	return err
}

// admit runs the server's authentication of a new connection, if the
// server has a secret or the client opens with the handshake; it reports
// whether the connection may go on to the TCPStore protocol, logging the
// refusal when not.
func (c *serverConn) admit() bool {
	s := c.srv
	if s.secret != nil {
		c.nc.SetDeadline(time.Now().Add(s.authTimeout))
		defer c.nc.SetDeadline(time.Time{})
	}
	opener, err := isAuthOpener(c.br)
	switch {
	case err != nil && s.secret != nil && c.br.Buffered() > 0:
		err = fmt.Errorf("%w: the connection sent %d bytes and then nothing for %v: %v", ErrAuth, c.br.Buffered(), s.authTimeout, err)
	case err != nil && s.secret != nil && !errors.Is(err, io.EOF):
		err = fmt.Errorf("%w: the connection sent nothing: %v", ErrAuth, err)
	case err != nil:
		return false // hung up before a byte: nothing to refuse
	case s.secret == nil && !opener:
		return true
	case !opener:
		first, _ := c.br.Peek(min(c.br.Buffered(), 8))
		err = fmt.Errorf("%w: unauthenticated connection (first bytes %x): a stranger, a rank without GOCOMM_SECRET, or a torch client (run the job with GOCOMM_STORE_AUTH=0 if torch ranks share the store)", ErrAuth, first)
	default:
		err = serverAuth(c.br, c.nc, s.secret)
	}
	if err != nil {
		s.refused.note(s.logger, c.nc.RemoteAddr(), err)
		return false
	}
	return true
}

// refusalLog counts a server's refused connections and logs them: the
// first refusalBurst each, then at most one line per refusalEvery with the
// count of those not logged, so a flood of strangers does not flood the log.
type refusalLog struct {
	mu         sync.Mutex // protects following
	total      int
	suppressed int
	last       time.Time
}

const (
	refusalBurst = 5
	refusalEvery = time.Second
)

// shouldLog is the logging policy: given the refusals counted before this
// one and the time of the last line, whether to log this one.
func shouldLog(total int, last, now time.Time) bool {
	return total < refusalBurst || now.Sub(last) >= refusalEvery
}

func (r *refusalLog) note(l *slog.Logger, from net.Addr, err error) {
	r.mu.Lock()
	now := time.Now()
	log := shouldLog(r.total, r.last, now)
	r.total++
	suppressed := r.suppressed
	if log {
		r.last, r.suppressed = now, 0
	} else {
		r.suppressed++
	}
	r.mu.Unlock()
	if log && l != nil {
		l.Warn("comm: store: connection refused", "from", from.String(), "err", err, "not logged since last", suppressed)
	}
}

func (r *refusalLog) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Refused returns how many connections the server has refused since it
// started (failed authentication, or a protocol violation such as an
// unknown query or an oversized length). Safe for concurrent use.
func (s *TCPStoreServer) Refused() int { return s.refused.count() }
