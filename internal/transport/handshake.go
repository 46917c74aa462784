package transport

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Handshake. The higher rank dials the lower one; then
//
//	dialer   -> acceptor: hello{size, rank, peerRank, maxFragment, job, nonce}
//	acceptor -> dialer:   hello{...} + HMAC(secret, "acceptor" | helloD | helloA)
//	dialer   -> acceptor: HMAC(secret, "dialer" | helloD | helloA)
//	acceptor -> dialer:   ack byte
//
// Both hellos carry fresh nonces, so a recorded exchange cannot be
// replayed; the role labels stop one side's proof from serving as the
// other's. job is a hash of the store prefix, so ranks of another job that
// shares the secret are refused too. With an empty secret the exchange
// still checks identity (job, world size, ranks). A hello is:
//
//	off size field
//	  0    4 magic "GCOM"
//	  4    1 version
//	  5    1 message type (hello)
//	  6    2 reserved, zero
//	  8    4 world size
//	 12    4 sender's rank
//	 16    4 rank the sender expects the receiver to be
//	 20    4 largest data fragment the sender accepts
//	 24   16 job id
//	 40   32 nonce
const (
	helloSize    = 72
	helloType    = 0x48 // 'H', distinct from frame types
	macSize      = sha256.Size
	ackOK        = 0x01
	dialerLabel  = "gocomm/v1 dialer"
	accptorLabel = "gocomm/v1 acceptor"
)

type hello struct {
	size, rank, peerRank int
	maxFragment          int
	job                  [16]byte
	nonce                [32]byte
}

func (h *hello) encode() []byte {
	b := make([]byte, helloSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], frameMagic)
	b[4] = frameVersion
	b[5] = helloType
	le.PutUint32(b[8:], uint32(h.size))
	le.PutUint32(b[12:], uint32(h.rank))
	le.PutUint32(b[16:], uint32(h.peerRank))
	le.PutUint32(b[20:], uint32(h.maxFragment))
	copy(b[24:40], h.job[:])
	copy(b[40:72], h.nonce[:])
	return b
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloSize {
		return h, fmt.Errorf("%w: hello of %d bytes", ErrHandshake, len(b))
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != frameMagic || b[4] != frameVersion || b[5] != helloType || le.Uint16(b[6:]) != 0 {
		return h, fmt.Errorf("%w: not a gocomm v%d hello", ErrHandshake, frameVersion)
	}
	h.size = int(le.Uint32(b[8:]))
	h.rank = int(le.Uint32(b[12:]))
	h.peerRank = int(le.Uint32(b[16:]))
	h.maxFragment = int(le.Uint32(b[20:]))
	copy(h.job[:], b[24:40])
	copy(h.nonce[:], b[40:72])
	if h.maxFragment < 1 || h.maxFragment > maxFragmentLimit {
		return h, fmt.Errorf("%w: fragment size %d out of range", ErrHandshake, h.maxFragment)
	}
	return h, nil
}

// handshakeConfig is what one rank brings to every handshake.
type handshakeConfig struct {
	rank, size  int
	job         [16]byte
	secret      []byte
	maxFragment int
}

func jobID(prefix string) [16]byte {
	sum := sha256.Sum256([]byte("gocomm job " + prefix))
	var id [16]byte
	copy(id[:], sum[:])
	return id
}

func handshakeMAC(secret []byte, label string, helloD, helloA []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(helloD)
	m.Write(helloA)
	return m.Sum(nil)
}

func (hc *handshakeConfig) hello(peerRank int) (*hello, error) {
	h := &hello{size: hc.size, rank: hc.rank, peerRank: peerRank, maxFragment: hc.maxFragment, job: hc.job}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return nil, err
	}
	return h, nil
}

// dialHandshake runs the dialer's side on conn, expecting rank target on
// the other end. It returns the largest fragment the peer accepts. The
// caller sets the deadline.
func (hc *handshakeConfig) dialHandshake(conn net.Conn, target int) (int, error) {
	mine, err := hc.hello(target)
	if err != nil {
		return 0, err
	}
	helloD := mine.encode()
	if _, err := conn.Write(helloD); err != nil {
		return 0, err
	}
	in := make([]byte, helloSize+macSize)
	if n, err := io.ReadFull(conn, in); err != nil {
		return 0, answerError(in[:n], err)
	}
	helloA := in[:helloSize]
	theirs, err := decodeHello(helloA)
	if err != nil {
		return 0, answerError(helloA, err)
	}
	switch {
	case theirs.job != hc.job:
		return 0, fmt.Errorf("%w: %w: a rank of another job answered (its store prefix differs)", ErrHandshake, errWrongProcess)
	case theirs.size != hc.size:
		return 0, fmt.Errorf("%w: %w: a rank of a world of %d answered, ours has %d", ErrHandshake, errWrongProcess, theirs.size, hc.size)
	case theirs.rank != target || theirs.peerRank != hc.rank:
		return 0, fmt.Errorf("%w: %w: rank %d of this job answered instead", ErrHandshake, errWrongProcess, theirs.rank)
	}
	if !hmac.Equal(in[helloSize:], handshakeMAC(hc.secret, accptorLabel, helloD, helloA)) {
		return 0, fmt.Errorf("%w: rank %d failed authentication (secrets differ)", ErrHandshake, target)
	}
	if _, err := conn.Write(handshakeMAC(hc.secret, dialerLabel, helloD, helloA)); err != nil {
		return 0, err
	}
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil || ack[0] != ackOK {
		return 0, fmt.Errorf("%w: rank %d refused the connection (already connected to rank %d?)", ErrHandshake, target, hc.rank)
	}
	return theirs.maxFragment, nil
}

// acceptHandshake runs the acceptor's side up to, not including, the ack:
// it returns the authenticated peer's rank and largest fragment. The
// caller decides whether to admit the peer and then calls sendAck.
func (hc *handshakeConfig) acceptHandshake(conn net.Conn) (peer, maxFragment int, err error) {
	helloD := make([]byte, helloSize)
	if _, err := io.ReadFull(conn, helloD); err != nil {
		return -1, 0, fmt.Errorf("%w: reading hello: %v", ErrHandshake, err)
	}
	theirs, err := decodeHello(helloD)
	if err != nil {
		return -1, 0, err
	}
	var refusal error
	switch {
	case theirs.job != hc.job:
		refusal = fmt.Errorf("%w: connection from another job (store prefix differs)", ErrHandshake)
	case theirs.size != hc.size:
		refusal = fmt.Errorf("%w: peer's world size is %d, ours %d", ErrHandshake, theirs.size, hc.size)
	case theirs.peerRank != hc.rank:
		refusal = fmt.Errorf("%w: peer wanted rank %d", ErrHandshake, theirs.peerRank)
	case theirs.rank <= hc.rank || theirs.rank >= hc.size:
		refusal = fmt.Errorf("%w: rank %d may not dial rank %d", ErrHandshake, theirs.rank, hc.rank)
	}
	mine, err := hc.hello(theirs.rank)
	if err != nil {
		return -1, 0, err
	}
	helloA := mine.encode()
	out := append(helloA, handshakeMAC(hc.secret, accptorLabel, helloD, helloA)...)
	// A gocomm peer that dialed the wrong process still gets this hello
	// (which holds no secret), so that it can say who answered; then the
	// connection is closed.
	if _, err := conn.Write(out); err != nil || refusal != nil {
		return -1, 0, cmp.Or(refusal, err)
	}
	mac := make([]byte, macSize)
	if _, err := io.ReadFull(conn, mac); err != nil {
		return -1, 0, fmt.Errorf("%w: connection claiming rank %d hung up before proving itself (secrets differ?): %v", ErrHandshake, theirs.rank, err)
	}
	if !hmac.Equal(mac, handshakeMAC(hc.secret, dialerLabel, helloD, helloA)) {
		return -1, 0, fmt.Errorf("%w: connection claiming rank %d failed authentication (secrets differ)", ErrHandshake, theirs.rank)
	}
	return theirs.rank, theirs.maxFragment, nil
}

func sendAck(conn net.Conn) error {
	_, err := conn.Write([]byte{ackOK})
	return err
}

// errWrongProcess marks a handshake answered by a process other than the
// rank dialed: the published address is wrong, and retrying cannot help.
var errWrongProcess = errors.New("the wrong process answered")

// answerError describes a dialed peer's answer that is not the expected
// hello: got is what it sent before err.
func answerError(got []byte, err error) error {
	var ne net.Error
	switch {
	case len(got) == 0 && errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %w: nothing answered the handshake in time: what listens there is not a gocomm rank", ErrHandshake, errWrongProcess)
	case len(got) == 0:
		return fmt.Errorf("%w: the connection was closed without an answer (a gocomm rank that refused it, say for a different secret, or another program): %v", ErrHandshake, err)
	case len(got) < 8 || binary.LittleEndian.Uint32(got) != frameMagic:
		return fmt.Errorf("%w: %w: it answered %q, not a gocomm hello: another program listens there", ErrHandshake, errWrongProcess, got[:min(len(got), 16)])
	}
	return fmt.Errorf("%w: %w: %v", ErrHandshake, errWrongProcess, err)
}

// errDuplicate refuses a second authenticated connection for one rank.
var errDuplicate = errors.New("duplicate connection")
